package agent

import (
	"os"
	"os/exec"
	"runtime"
	"syscall"
)

// execSysProcAttr puts the command in its own process group, so a cancel or
// a timeout can kill everything it started, and has the kernel kill it
// (SIGKILL) when the daemon dies.
func execSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// execRun runs cmd on a locked OS thread: the parent-death signal fires
// when the thread that started the child exits, not the process, and the
// runtime may end an unlocked thread while the child still runs.
func execRun(cmd *exec.Cmd) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return cmd.Run()
}

// execKillGroup kills the process group p leads.
func execKillGroup(p *os.Process) error {
	if err := syscall.Kill(-p.Pid, syscall.SIGKILL); err != nil && err != syscall.ESRCH {
		return err
	}
	return nil
}

// execCleanup kills what is left of a finished command's process group.
// The group id cannot have been reused: a process group's id stays taken
// while any member lives.
func execCleanup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
