package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// errandBin is the binary under test, built once by TestMain.
var errandBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "errand-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	// Others may run the binary: a test run as root serves as nobody.
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	errandBin = filepath.Join(dir, "errand")
	args := []string{"build", "-o", errandBin}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "github.com/errandhq/errand/cmd/errand")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build errand:", err)
		os.RemoveAll(dir)
		os.Exit(2)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// repoPath is a path in the repository, absolute.
func repoPath(t *testing.T, rel string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", rel))
	require.NoError(t, err)
	return p
}

// daemon is one running `errand serve`.
type daemon struct {
	t      *testing.T
	home   string
	cmd    *exec.Cmd
	url    string
	token  string
	exited chan struct{}

	mu      sync.Mutex
	stderr  bytes.Buffer
	newLine chan struct{} // closed and replaced at each line of stderr
}

var listenRE = regexp.MustCompile(`msg="errand serving".* listen=(\S+)`)

// startDaemon runs errand serve with ERRAND_HOME=home on a random port and
// returns once it logs that it is serving.
func startDaemon(t *testing.T, home string, env ...string) *daemon {
	t.Helper()
	d := &daemon{t: t, home: home, exited: make(chan struct{})}
	d.cmd = exec.Command(errandBin, "serve", "--listen", "127.0.0.1:0")
	d.cmd.Env = append(os.Environ(), append([]string{"ERRAND_HOME=" + home}, env...)...)
	d.cmd.Dir = home
	stderr, err := d.cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, d.cmd.Start())
	ready := make(chan string, 1)
	go func() {
		defer close(d.exited)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line := sc.Text()
			d.mu.Lock()
			d.stderr.WriteString(line + "\n")
			if d.newLine != nil {
				close(d.newLine)
				d.newLine = nil
			}
			d.mu.Unlock()
			if m := listenRE.FindStringSubmatch(line); m != nil {
				ready <- m[1]
			}
		}
		d.cmd.Wait()
	}()
	t.Cleanup(func() {
		if d.cmd.ProcessState == nil {
			d.cmd.Process.Kill()
		}
		<-d.exited
		if t.Failed() {
			t.Logf("daemon stderr:\n%s", d.log())
		}
	})
	select {
	case addr := <-ready:
		d.url = "http://" + addr
	case <-d.exited:
		t.Fatalf("errand serve exited before serving:\n%s", d.log())
	case <-time.After(60 * time.Second):
		t.Fatalf("errand serve did not start:\n%s", d.log())
	}
	token, err := os.ReadFile(filepath.Join(home, "token"))
	require.NoError(t, err)
	d.token = strings.TrimSpace(string(token))
	return d
}

func (d *daemon) log() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stderr.String()
}

// logUntilLine returns the log so far and a channel closed when the next
// line arrives.
func (d *daemon) logUntilLine() (string, <-chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.newLine == nil {
		d.newLine = make(chan struct{})
	}
	return d.stderr.String(), d.newLine
}

// waitLogged waits until one of daemons logs a line containing s, looking
// again at each line any of them writes, and returns that daemon.
func waitLogged(t *testing.T, daemons []*daemon, s string, timeout time.Duration) *daemon {
	t.Helper()
	deadline := time.After(timeout)
	for {
		cases := make([]reflect.SelectCase, 0, len(daemons)+1)
		for _, d := range daemons {
			log, next := d.logUntilLine()
			if strings.Contains(log, s) {
				return d
			}
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(next)})
		}
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(deadline)})
		if chosen, _, _ := reflect.Select(cases); chosen == len(daemons) {
			require.FailNow(t, "not logged", "no daemon logged %q within %s", s, timeout)
		}
	}
}

// stop sends SIGTERM and waits for a clean exit.
func (d *daemon) stop() {
	d.t.Helper()
	require.NoError(d.t, d.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-d.exited:
	case <-time.After(60 * time.Second):
		d.t.Fatalf("errand serve did not stop on SIGTERM:\n%s", d.log())
	}
	require.True(d.t, d.cmd.ProcessState.Success(), "errand serve exited with %v:\n%s", d.cmd.ProcessState, d.log())
}

// kill9 kills the daemon as a crash would.
func (d *daemon) kill9() {
	d.t.Helper()
	require.NoError(d.t, d.cmd.Process.Signal(syscall.SIGKILL))
	<-d.exited
}

// errand runs the CLI against d and returns stdout, stderr and the exit
// code.
func (d *daemon) errand(args ...string) (string, string, int) {
	d.t.Helper()
	return runCLI(d.t, d.home, append([]string{"--server", d.url}, args...)...)
}

func runCLI(t *testing.T, home string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, errandBin, args...)
	cmd.Env = append(os.Environ(), "ERRAND_HOME="+home, "NO_COLOR=1")
	cmd.Dir = home
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if exit, ok := err.(*exec.ExitError); ok {
		code = exit.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return stdout.String(), stderr.String(), code
}

// api calls the HTTP API with the token and decodes the JSON answer into
// out (when not nil); it returns the status.
func (d *daemon) api(method, path string, body any, out any) int {
	d.t.Helper()
	status, b := d.call(method, path, body)
	if out != nil && status < 300 {
		require.NoError(d.t, json.Unmarshal(b, out), string(b))
	}
	return status
}

// apiRaw is api that decodes error answers too.
func (d *daemon) apiRaw(method, path string, body any, out any) int {
	d.t.Helper()
	status, b := d.call(method, path, body)
	require.NoError(d.t, json.Unmarshal(b, out), string(b))
	return status
}

// call sends one request with the token and returns the status and body.
func (d *daemon) call(method, path string, body any) (int, []byte) {
	d.t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(d.t, err)
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(d.t.Context(), method, d.url+path, r)
	require.NoError(d.t, err)
	req.Header.Set("Authorization", "Bearer "+d.token)
	res, err := http.DefaultClient.Do(req)
	require.NoError(d.t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(d.t, err)
	return res.StatusCode, b
}

// sse is one event read from a stream.
type sse struct {
	ID        int64           `json:"id"`
	Type      string          `json:"type"`
	TaskID    string          `json:"task_id"`
	Data      json.RawMessage `json:"data"`
	CreatedAt time.Time       `json:"created_at"`
}

// stream opens an SSE route and sends its events until ctx ends.
func (d *daemon) stream(ctx context.Context, path string, lastEventID int64) <-chan sse {
	d.t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", d.url+path, nil)
	require.NoError(d.t, err)
	req.Header.Set("Authorization", "Bearer "+d.token)
	if lastEventID > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(lastEventID, 10))
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(d.t, err)
	require.Equal(d.t, http.StatusOK, res.StatusCode)
	out := make(chan sse, 4096)
	go func() {
		defer close(out)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var ev sse
			if json.Unmarshal([]byte(line), &ev) != nil {
				continue
			}
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// waitEvent reads a task's stream until an event of one of types.
func (d *daemon) waitEvent(taskID string, types ...string) sse {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(d.t.Context(), 2*time.Minute)
	defer cancel()
	for ev := range d.stream(ctx, "/api/tasks/"+taskID+"/events", 0) {
		for _, typ := range types {
			if ev.Type == typ {
				return ev
			}
		}
	}
	d.t.Fatalf("task %s: no %v event", taskID, types)
	return sse{}
}

// writeFile writes an executable or config file under dir.
func writeFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(content), mode))
}
