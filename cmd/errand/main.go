// Command errand is errand's daemon and command-line client.
package main

import (
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
)

// defaultGCPercent is the collector's pace when GOGC is not set. errand's
// Go heap is small (5–7 MB live while 100 workers drain tasks; SQLite's
// pages live outside it), so at Go's default of 100 it is collected many
// times a second, and each collection takes CPU from the single writer.
// At 200 it is collected half as often, for about 8 MB more memory.
const defaultGCPercent = 200

// tuneGC sets the collector's pace unless the environment (lookup) sets
// GOGC; it returns the pace set, or 0 when it left Go's alone.
func tuneGC(lookup func(string) (string, bool)) int {
	if _, set := lookup("GOGC"); set {
		return 0
	}
	debug.SetGCPercent(defaultGCPercent)
	return defaultGCPercent
}

func main() {
	tuneGC(os.LookupEnv)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// After the first signal the default handling returns, so a second
		// Ctrl-C kills a daemon whose graceful shutdown hangs.
		<-ctx.Done()
		stop()
	}()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err))
}

// run executes one command line with the process environment; everything it
// prints, errors included, goes to stdout and stderr, so tests can call it
// directly. The error's exit code is exitCode(err).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runEnv(ctx, args, stdout, stderr, osEnv())
}

// runEnv is run with an explicit environment.
func runEnv(ctx context.Context, args []string, stdout, stderr io.Writer, e *env) error {
	a := &app{env: e, stdout: stdout, stderr: stderr}
	root := a.newRootCmd()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if e.stdin != nil {
		root.SetIn(e.stdin)
	}
	err := root.ExecuteContext(ctx)
	if msg := a.describe(err); msg != "" {
		a.clearLine()
		io.WriteString(stderr, "errand: "+msg+"\n")
	}
	return err
}

// exitError ends a command with a chosen exit code. Err is what went
// wrong; nil when the command has already said it (errand status).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return "exit status " + itoa(e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// exitInterrupted is the exit code of a command stopped by SIGINT or
// SIGTERM, as a shell reports one killed by SIGINT.
const exitInterrupted = 130

// exitCode is the process exit code for run's error: 0 for none, an
// exitError's code, 130 for an interrupted command, else 1.
func exitCode(err error) int {
	var ee *exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	case errors.Is(err, context.Canceled):
		return exitInterrupted
	}
	return 1
}
