package engine

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// DefaultOwner names this process on its leases: host:pid:boot, where boot
// identifies the machine's current boot, so a lease left by a process on
// this host can be told dead (its pid is gone, or the machine rebooted).
func DefaultOwner() string {
	return localHost() + ":" + strconv.Itoa(os.Getpid()) + ":" + bootID()
}

var bootID = sync.OnceValue(func() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "0"
	}
	id, _, _ := strings.Cut(strings.TrimSpace(string(b)), "-")
	return id
})

var localHost = sync.OnceValue(func() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "localhost"
	}
	return h
})

// deadOwners returns the owners, among those given, that are processes of
// this host that no longer run.
func deadOwners(owners []string) []string {
	var dead []string
	for _, o := range owners {
		host, pid, boot, ok := parseOwner(o)
		if !ok || host != localHost() || pid == os.Getpid() && boot == bootID() {
			continue
		}
		if boot != bootID() || !processAlive(pid) {
			dead = append(dead, o)
		}
	}
	return dead
}

func parseOwner(owner string) (host string, pid int, boot string, ok bool) {
	rest, boot, ok1 := cutLast(owner, ":")
	host, pidStr, ok2 := cutLast(rest, ":")
	pid, err := strconv.Atoi(pidStr)
	if !ok1 || !ok2 || err != nil || pid <= 0 {
		return "", 0, "", false
	}
	return host, pid, boot, true
}

func cutLast(s, sep string) (before, after string, ok bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
