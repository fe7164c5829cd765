package agent

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A step's command dies with the process that started it: here a helper
// process stands in for the daemon and is killed with SIGKILL, so nothing
// of it can stop the command on its way out.
func TestExecCommandDiesWithDaemon(t *testing.T) {
	t.Parallel()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	daemon := exec.Command(os.Args[0], "-test.run=^TestExecHelperDaemon$")
	daemon.Env = append(os.Environ(), "ERRAND_EXEC_HELPER_DAEMON=1")
	daemon.Stdout = w // the command inherits it: EOF means it has exited
	daemon.Stderr = os.Stderr
	require.NoError(t, daemon.Start())
	w.Close()

	line, err := bufio.NewReader(r).ReadString('\n')
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	require.NoError(t, err, "the command's pid, got %q", line)
	require.NoError(t, daemon.Process.Kill())
	_ = daemon.Wait()

	eof := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, r)
		eof <- err
	}()
	select {
	case err := <-eof:
		require.NoError(t, err)
	case <-time.After(waitTimeout):
		_ = syscall.Kill(pid, syscall.SIGKILL)
		t.Fatal("the command outlived the daemon")
	}
}

// TestExecHelperDaemon is the daemon of TestExecCommandDiesWithDaemon: it
// starts a command the way Exec does and waits on it forever.
func TestExecHelperDaemon(t *testing.T) {
	if os.Getenv("ERRAND_EXEC_HELPER_DAEMON") != "1" {
		t.Skip("run by TestExecCommandDiesWithDaemon")
	}
	cmd := exec.Command("/bin/sh", "-c", "echo $$; exec sleep 1000")
	cmd.Stdout = os.Stdout
	cmd.SysProcAttr = execSysProcAttr()
	_ = execRun(cmd)
	os.Exit(1)
}
