package mcpclient

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// stderrPipe is a pipe a command server gets as its standard error: its
// read end sees EOF once the server and everything it started are gone.
type stderrPipe struct {
	r, w  *os.File
	eof   chan struct{}
	lines chan string // the lines read, in order; closed at EOF
}

func newStderrPipe(t *testing.T) *stderrPipe {
	t.Helper()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	p := &stderrPipe{r: r, w: w, eof: make(chan struct{}), lines: make(chan string, 100)}
	go func() {
		defer close(p.eof)
		defer close(p.lines)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
	}()
	t.Cleanup(func() {
		w.Close()
		r.Close()
	})
	return p
}

// closeWriter closes errand's copy of the write end, so that EOF means the
// server's copies are closed too.
func (p *stderrPipe) closeWriter() { p.w.Close() }

func (p *stderrPipe) waitEOF(t *testing.T, what string) {
	t.Helper()
	select {
	case <-p.eof:
	case <-time.After(waitTimeout):
		t.Fatalf("%s is still running", what)
	}
}

func alive(pid int) bool {
	// A zombie still answers signal 0: read its state.
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

func TestCommandServerLifecycle(t *testing.T) {
	t.Parallel()
	stderr := newStderrPipe(t)
	srv := testCommandServer("child", stderr.w)
	srv.Env["ERRAND_MCPCLIENT_TEST_VALUE"] = "from errand.yaml"
	m, err := New(&Config{Servers: []Server{srv}})
	require.NoError(t, err)
	defer m.Close()

	// Lazy: nothing runs until a call needs it.
	select {
	case line := <-stderr.lines:
		t.Fatalf("the server started before it was needed: %q", line)
	default:
	}
	first, key := whoami(t, m, "child", "tsk_1:1:1")
	require.NotEqual(t, os.Getpid(), first)
	require.Equal(t, "tsk_1:1:1", key)
	require.Equal(t, "test server ready", <-stderr.lines)
	out, err := m.Call(t.Context(), "child", "env", "", json.RawMessage(`{"name":"ERRAND_MCPCLIENT_TEST_VALUE"}`))
	require.NoError(t, err)
	require.JSONEq(t, `"from errand.yaml"`, string(out), "env is added to the server's environment")

	// Killed, it is started again at the next need.
	sess := m.current("child")
	require.NoError(t, syscall.Kill(first, syscall.SIGKILL))
	waitEnded(t, sess)
	require.False(t, alive(first), "the dead server was reaped")
	second, _ := whoami(t, m, "child", "")
	require.NotEqual(t, first, second)

	// Close stops it and what it started.
	out, err = m.Call(t.Context(), "child", "spawn", "", nil)
	require.NoError(t, err)
	var grandchild string
	require.NoError(t, json.Unmarshal(out, &grandchild))
	require.True(t, alive(atoi(t, grandchild)))
	require.NoError(t, m.Close())
	stderr.closeWriter()
	stderr.waitEOF(t, "the server or its child")
	require.False(t, alive(second))
}

func TestCommandServerCrashMidCall(t *testing.T) {
	t.Parallel()
	m, err := New(&Config{Servers: []Server{testCommandServer("child", nil)}})
	require.NoError(t, err)
	defer m.Close()
	first, _ := whoami(t, m, "child", "")
	sess := m.current("child")
	_, err = m.Call(t.Context(), "child", "crash", "", nil)
	require.ErrorContains(t, err, "child.crash: ")
	waitEnded(t, sess)
	second, _ := whoami(t, m, "child", "")
	require.NotEqual(t, first, second)
}

func TestCommandServerStartFailures(t *testing.T) {
	t.Parallel()
	failing := testCommandServer("db", nil)
	failing.Env[envFailStart] = "cannot open /srv/db: permission denied"
	m, err := New(&Config{Servers: []Server{
		failing,
		{Name: "missing", Command: []string{"errand-no-such-mcp-server"}},
	}})
	require.NoError(t, err)
	defer m.Close()

	_, err = m.Call(t.Context(), "db", "whoami", "", nil)
	var ue *UnavailableError
	require.ErrorAs(t, err, &ue)
	require.ErrorContains(t, err, "MCP server db is unavailable: start: ")
	require.ErrorContains(t, err, "(its stderr ends: cannot open /srv/db: permission denied)", "the server's own words say why")

	_, err = m.Call(t.Context(), "missing", "whoami", "", nil)
	require.ErrorContains(t, err, "MCP server missing is unavailable: start: ")
	require.ErrorContains(t, err, "errand-no-such-mcp-server")
	require.ErrorIs(t, err, exec.ErrNotFound)
}

// A command server dies with errand, even one that would outlive its stdin
// closing: here a helper process stands in for the daemon and is killed
// with SIGKILL, so nothing of it can stop the server on its way out.
func TestCommandServerDiesWithErrand(t *testing.T) {
	t.Parallel()
	stderr := newStderrPipe(t)
	daemon := exec.Command(os.Args[0], "-test.run=^$")
	daemon.Env = append(os.Environ(), envTestDaemon+"=1")
	daemon.Stdout = stderr.w // the server inherits it as its stderr
	daemon.Stderr = os.Stderr
	require.NoError(t, daemon.Start())
	stderr.closeWriter()

	var pid int
	for line := range stderr.lines {
		if rest, ok := strings.CutPrefix(line, "pid="); ok {
			pid = atoi(t, rest)
			break
		}
		require.NotContains(t, line, "error:")
	}
	require.True(t, alive(pid))
	t.Cleanup(func() {
		if t.Failed() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	require.NoError(t, daemon.Process.Kill())
	_ = daemon.Wait()
	stderr.waitEOF(t, "the server of the killed daemon")
}

// A server that ignores its stdin closing and SIGTERM is killed by Close
// once StopTimeout has passed twice.
func TestCloseStopsStubbornServer(t *testing.T) {
	t.Parallel()
	stderr := newStderrPipe(t)
	srv := testCommandServer("child", stderr.w)
	srv.Env[envStubborn] = "1"
	m, err := New(&Config{Servers: []Server{srv}, StopTimeout: 20 * time.Millisecond})
	require.NoError(t, err)
	pid, _ := whoami(t, m, "child", "")
	require.NoError(t, m.Close())
	require.False(t, alive(pid))
	stderr.closeWriter()
	stderr.waitEOF(t, "the stubborn server")
}
