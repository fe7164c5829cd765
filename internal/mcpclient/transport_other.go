//go:build !unix

package mcpclient

import (
	"os/exec"
	"syscall"
	"time"
)

// procAttr is empty where there are no process groups: stopping a server
// stops the server itself, not what it started.
func procAttr() *syscall.SysProcAttr { return nil }

func startOnThread(start func() error) (release func(), err error) {
	if err := start(); err != nil {
		return nil, err
	}
	return func() {}, nil
}

func killGroup(*exec.Cmd) {}

// awaitExit has no way here to wait for a process it does not reap.
func awaitExit(*exec.Cmd, time.Duration) {}
