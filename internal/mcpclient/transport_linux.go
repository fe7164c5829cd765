package mcpclient

import (
	"os/exec"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// procAttr puts a command server in its own process group, so stopping it
// stops what it started, and has the kernel kill it (SIGKILL) when errand
// dies.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// startOnThread runs start, which starts a process, on a locked OS thread
// and keeps the thread locked until release is called (once the process
// is reaped): the parent-death signal fires when the thread that started
// the child ends, and the runtime ends a thread whose goroutine exits
// while locked, or may reuse it for one that does.
func startOnThread(start func() error) (release func(), err error) {
	started := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		err := start()
		started <- err
		if err == nil {
			<-done
		}
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return func() { close(done) }, nil
}

// killGroup kills what is left of a stopped server's process group. The
// group id cannot have been reused while a member lives.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

// awaitExit waits, at most bound, for a server sent SIGKILL to end: on a
// loaded machine the kernel may take a while to end it after the SDK has
// stopped waiting. A pidfd is readable once its process has ended, and
// polling it reaps nothing: the SDK's own wait still does.
func awaitExit(cmd *exec.Cmd, bound time.Duration) {
	if cmd.Process == nil {
		return
	}
	fd, err := unix.PidfdOpen(cmd.Process.Pid, 0)
	if err != nil {
		return // reaped already
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	deadline := time.Now().Add(bound)
	for {
		ms := int(time.Until(deadline).Milliseconds())
		if ms <= 0 {
			return
		}
		if _, err := unix.Poll(fds, ms); err != unix.EINTR {
			return
		}
	}
}
