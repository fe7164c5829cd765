package mcpclient

import (
	"os/exec"
	"runtime"
	"syscall"
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
