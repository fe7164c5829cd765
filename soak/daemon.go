package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// daemon is one errand serve of one ERRAND_HOME, started again after each
// kill.
type daemon struct {
	name string
	bin  string
	home string
	addr string // host:port it listens on
	log  string // its stdout and stderr, every life appended
	// env is added to the environment of each life started from now on:
	// the crash walk arms a crash point there (ERRAND_CRASH_AT).
	env []string

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{} // closed when the current process has exited
	killed  bool          // the current process was killed by the soak
	started time.Time     // when the current process was started
	served  bool          // the current process has answered /healthz
	lives   int
	err     error // set when a process exited without being killed
	// crashes counts lives that ended at an armed crash point: a SIGKILL
	// errand sent itself, having said so in its log.
	crashes int
}

// writeHome makes an ERRAND_HOME whose errand.yaml runs the soak's step
// as the exec agent "soak".
func writeHome(home, addr, store, stepBin, ledger string, steps int) error {
	if err := os.MkdirAll(home, 0o700); err != nil {
		return err
	}
	cfg := fmt.Sprintf(`# written by the soak (soak/daemon.go)
listen: %q
workers: 4
lease_ttl: 2s
heartbeat_interval: 1s
agents:
  soak:
    kind: exec
    command: [%q]
    env:
      %s: "1"
      %s: %q
      %s: "%d"
    max_steps: %d
    step_timeout: 30s
`, addr, stepBin, envStep, envLedger, ledger, envSteps, steps, steps+5)
	if store != "" {
		cfg += fmt.Sprintf("store: %q\n", store)
	}
	return os.WriteFile(filepath.Join(home, "errand.yaml"), []byte(cfg), 0o600)
}

// freeAddr is a loopback address no one listens on now.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// start starts a new life of the daemon; it does not wait for it to serve.
func (d *daemon) start() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	logf, err := os.OpenFile(d.log, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	d.lives++
	fmt.Fprintf(logf, "=== soak: life %d of %s at %s\n", d.lives, d.name, time.Now().UTC().Format(time.RFC3339Nano))
	lifeStart, _ := logf.Seek(0, io.SeekEnd)
	cmd := exec.Command(d.bin, "serve")
	cmd.Env = append(append(os.Environ(), "ERRAND_HOME="+d.home), d.env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group, so a Ctrl-C at the terminal reaches the soak,
	// which kills it; and it dies with the soak if the soak is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", d.name, err)
	}
	exited := make(chan struct{})
	d.cmd, d.exited, d.killed, d.started, d.served = cmd, exited, false, time.Now(), false
	go d.watchServe(cmd, exited)
	go func() {
		werr := cmd.Wait()
		logf.Close()
		crashed := crashedAtPoint(cmd, d.log, lifeStart)
		d.mu.Lock()
		switch {
		case d.killed:
		case crashed:
			d.crashes++
		case d.err == nil:
			d.err = fmt.Errorf("%s (pid %d) exited on its own: %v (log: %s)", d.name, cmd.Process.Pid, werr, d.log)
		}
		d.mu.Unlock()
		close(exited)
	}()
	return nil
}

// crashedAtPoint reports whether a life ended at a crash point: killed by
// SIGKILL with no one but itself to send it, after saying so in its log
// (what internal/crashpoint writes) from offset on.
func crashedAtPoint(cmd *exec.Cmd, log string, offset int64) bool {
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		return false
	}
	f, err := os.Open(log)
	if err != nil {
		return false
	}
	defer f.Close()
	b, err := io.ReadAll(io.NewSectionReader(f, offset, 1<<40))
	return err == nil && bytes.Contains(b, []byte(crashMarker))
}

// crashMarker opens the line errand writes as it kills itself at a crash
// point (internal/crashpoint).
const crashMarker = "errand: crash point reached: "

// exited is the channel closed when the current life ends.
func (d *daemon) exitedChan() chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.exited
}

// crashCount is how many lives ended at a crash point.
func (d *daemon) crashCount() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.crashes
}

// kill sends SIGKILL to the daemon's process (not its group: its steps die
// by their parent-death signal, as they would in a crash) and waits for it
// to be gone.
func (d *daemon) kill() {
	d.mu.Lock()
	cmd, exited := d.cmd, d.exited
	if cmd == nil {
		d.mu.Unlock()
		return
	}
	d.killed = true
	d.mu.Unlock()
	select {
	case <-exited: // gone already: its pid may be another process's now
	default:
		_ = cmd.Process.Kill() // SIGKILL; a no-op once Wait has reaped it
	}
	<-exited
}

// watchServe polls /healthz until this life of the daemon answers it or
// ends, to tell kills before it served from the others.
func (d *daemon) watchServe(cmd *exec.Cmd, exited chan struct{}) {
	c := &http.Client{Timeout: time.Second}
	for {
		if resp, err := c.Get(d.url() + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				d.mu.Lock()
				if d.cmd == cmd {
					d.served = true
				}
				d.mu.Unlock()
				return
			}
		}
		select {
		case <-exited:
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (d *daemon) hasServed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.served
}

func (d *daemon) startedAt() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.started
}

// failure is why the daemon stopped without being killed, if it did.
func (d *daemon) failure() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}

// url is the daemon's API root.
func (d *daemon) url() string { return "http://" + d.addr }

// token reads the API token the daemon wrote into its home.
func (d *daemon) token() (string, error) {
	b, err := os.ReadFile(filepath.Join(d.home, "token"))
	return strings.TrimSpace(string(b)), err
}

// waitReady polls /healthz until the daemon serves, it dies, or ctx ends.
func (d *daemon) waitReady(ctx context.Context) error {
	c := &http.Client{Timeout: 2 * time.Second}
	for {
		if err := d.failure(); err != nil {
			return err
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.url()+"/healthz", nil)
		if resp, err := c.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not serving: %w (log: %s)", d.name, ctx.Err(), d.log)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
