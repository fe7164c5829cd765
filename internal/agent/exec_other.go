//go:build !unix

package agent

import (
	"os"
	"os/exec"
	"syscall"
)

// execSysProcAttr is empty where there are no process groups to kill: a
// cancel or a timeout kills the command itself, not what it started.
func execSysProcAttr() *syscall.SysProcAttr { return nil }

func execRun(cmd *exec.Cmd) error { return cmd.Run() }

func execKillGroup(p *os.Process) error { return p.Kill() }

func execCleanup(*exec.Cmd) {}
