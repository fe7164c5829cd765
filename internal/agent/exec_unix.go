//go:build unix && !linux

package agent

import (
	"os"
	"os/exec"
	"syscall"
)

// execSysProcAttr puts the command in its own process group, so a cancel or
// a timeout can kill everything it started. Only Linux has a parent-death
// signal: elsewhere a command outlives a daemon that dies without stopping
// it.
func execSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

func execRun(cmd *exec.Cmd) error { return cmd.Run() }

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
