//go:build unix && !linux

package mcpclient

import (
	"os/exec"
	"syscall"
	"time"
)

// procAttr puts a command server in its own process group, so stopping it
// stops what it started. Only Linux has a parent-death signal: elsewhere a
// server outlives an errand that dies without stopping it.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

func startOnThread(start func() error) (release func(), err error) {
	if err := start(); err != nil {
		return nil, err
	}
	return func() {}, nil
}

// killGroup kills what is left of a stopped server's process group.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

// awaitExit has no way here to wait for a process it does not reap.
func awaitExit(*exec.Cmd, time.Duration) {}
