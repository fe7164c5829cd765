package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// update rewrites the transcripts' golden files: go test ./cmd/errand -run Transcript -update
var update = flag.Bool("update", false, "rewrite testdata/*.golden from this run")

// Stamped into the binary the transcripts run, as make build stamps a
// release.
const (
	stampedVersion = "v9.9.9-transcript"
	stampedTime    = "2026-01-02T03:04:05Z"
)

var (
	binDir  string
	binOnce sync.Once
	binPath string
	binErr  error
)

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// errandBinary builds the real errand once, stamped with -ldflags -X as
// make build does.
func errandBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "errand-transcript-")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "errand")
		pkg := "github.com/errandhq/errand/internal/version"
		build := exec.Command("go", "build", "-o", binPath,
			"-ldflags", "-X "+pkg+".version="+stampedVersion+" -X "+pkg+".buildTime="+stampedTime,
			"github.com/errandhq/errand/cmd/errand")
		out, err := build.CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("build errand: %v\n%s", err, out)
		}
	})
	require.NoError(t, binErr)
	return binPath
}

// transcriptEnv is the environment the binary runs in: only a home, no
// colours, UTC.
func transcriptEnv(home string) []string {
	return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "ERRAND_HOME=" + home, "NO_COLOR=1", "TZ=UTC", "TERM=dumb"}
}

// transcript runs errand with args and returns what a user sees: the
// command, its stdout, its stderr and its exit code.
func transcript(t *testing.T, home string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, errandBinary(t), args...)
	cmd.Env = transcriptEnv(home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return fmt.Sprintf("$ errand %s\n--- stdout\n%s--- stderr\n%s--- exit %d\n", strings.Join(args, " "), stdout.String(), stderr.String(), code)
}

// golden compares got, with the run's variable parts replaced, to
// testdata/name.golden, or writes it with -update.
func golden(t *testing.T, name, got string, replace ...string) {
	t.Helper()
	got = strings.NewReplacer(replace...).Replace(got)
	got = portRE.ReplaceAllString(got, "127.0.0.1:PORT")
	// What the build machine decides: its Go and whether VCS is stamped.
	got = strings.ReplaceAll(got, runtime.Version(), "GOVERSION")
	got = commitRE.ReplaceAllString(got, "commit  COMMIT")
	path := filepath.Join("testdata", name+".golden")
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run with -update to create it")
	require.Equal(t, string(want), got)
}

var (
	portRE   = regexp.MustCompile(`127\.0\.0\.1:\d+`)
	commitRE = regexp.MustCompile(`(?m)^commit  .*$`)
)

// TestTranscriptCLI: what a user sees for a mistyped command, missing or
// extra arguments, and errand version, from the real binary.
func TestTranscriptCLI(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"version", []string{"version"}},
		{"version_flag", []string{"--version"}},
		{"unknown_subcommand", []string{"tasks", "sho"}},
		{"unknown_command", []string{"tsks"}},
		{"ask_missing_goal", []string{"ask"}},
		{"show_missing_id", []string{"tasks", "show"}},
		{"show_extra_arg", []string{"tasks", "show", "tsk_1", "tsk_2"}},
		{"version_extra_arg", []string{"version", "now"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			home := t.TempDir()
			golden(t, tc.name, transcript(t, home, tc.args...), home, "$ERRAND_HOME")
		})
	}
}

// TestTranscriptVersionJSON: the stamped version and build time reach
// errand version --json.
func TestTranscriptVersionJSON(t *testing.T) {
	t.Parallel()
	out := transcript(t, t.TempDir(), "version", "--json")
	require.Contains(t, out, `"version": "`+stampedVersion+`"`)
	require.Contains(t, out, `"build_time": "`+stampedTime+`"`)
	require.Contains(t, out, "--- exit 0\n")
}

// servingRE finds the daemon's start line and its address.
var servingRE = regexp.MustCompile(`msg="errand serving".* listen=(\S+)`)

// serveBinary starts errand serve in home and returns its start line
// and address; the daemon stops when the test ends.
func serveBinary(t *testing.T, home string) (line, addr string) {
	t.Helper()
	cmd := exec.Command(errandBinary(t), "serve", "--listen", "127.0.0.1:0")
	cmd.Env = transcriptEnv(home)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default: // nobody reads after the start line
			}
		}
	}()
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	timeout := time.After(time.Minute)
	for {
		select {
		case l, ok := <-lines:
			require.True(t, ok, "errand serve exited before it served")
			if m := servingRE.FindStringSubmatch(l); m != nil {
				return l, m[1]
			}
		case <-timeout:
			t.Fatal("errand serve did not start within a minute")
		}
	}
}

// TestTranscriptServe: the start line names the dashboard and the token's
// file, an error from the daemon is printed with one "errand:" prefix,
// and a second daemon on a busy port says what holds it and what to do.
func TestTranscriptServe(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	line, addr := serveBinary(t, home)
	token, err := os.ReadFile(filepath.Join(home, "token"))
	require.NoError(t, err)
	require.NotContains(t, line, strings.TrimSpace(string(token)))
	line = regexp.MustCompile(`^time=\S+ `).ReplaceAllString(line, "time=TIME ")
	line = regexp.MustCompile(` pid=\d+`).ReplaceAllString(line, " pid=PID")
	golden(t, "serve_start_line", line+"\n", home, "$ERRAND_HOME")

	out := transcript(t, home, "--server", addr, "ask", "--agent", "nobody", "Summarize the report")
	golden(t, "ask_unknown_agent", out, home, "$ERRAND_HOME", addr, "127.0.0.1:PORT")

	other := t.TempDir()
	out = transcript(t, other, "serve", "--listen", addr)
	golden(t, "serve_busy_port", out, other, "$ERRAND_HOME")
}

// TestTranscriptRefusals: what a user sees when asking for what a task's
// state does not allow — cancelling it twice, retrying or pausing it once
// it has ended — said in the task's words, from the real binary.
func TestTranscriptRefusals(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(home, "errand.yaml"), []byte(
		"agents:\n  slow: {kind: exec, command: [\"sleep\", \"60\"]}\n"), 0o600))
	_, addr := serveBinary(t, home)
	out := transcript(t, home, "--server", addr, "ask", "--agent", "slow", "Wait a minute")
	id := regexp.MustCompile(`tsk_[0-9A-Z]+`).FindString(out)
	require.NotEmpty(t, id, out)
	out = transcript(t, home, "--server", addr, "tasks", "cancel", id)
	require.Contains(t, out, "--- exit 0", out)
	// A running task ends cancelled once its worker has stopped it: watch
	// follows the daemon's event stream until then.
	out = transcript(t, home, "--server", addr, "tasks", "watch", id)
	require.Contains(t, out, "--- exit 1", out)
	require.Contains(t, transcript(t, home, "--server", addr, "--json", "tasks", "show", id), `"status": "cancelled"`)
	var all strings.Builder
	for _, args := range [][]string{
		{"tasks", "cancel", id},
		{"tasks", "retry", id},
		{"tasks", "pause", id},
	} {
		all.WriteString(transcript(t, home, append([]string{"--server", addr}, args...)...))
	}
	golden(t, "refusals", all.String(), home, "$ERRAND_HOME", id, "tsk_ID", addr, "127.0.0.1:PORT")
}

// TestTranscriptConfigSyntaxError: a mis-indented line of errand.yaml is
// reported at its own line and column, quoted.
func TestTranscriptConfigSyntaxError(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(home, "errand.yaml"), []byte(
		"listen: 127.0.0.1:0\nagents:\n  shell:\n     kind: exec\n    command: [\"./agent.sh\"]\n"), 0o600))
	golden(t, "config_syntax_error", transcript(t, home, "serve"), home, "$ERRAND_HOME")
}

// TestTranscriptInterruptedWait: Ctrl-C in ask --wait stops the waiting,
// not the task, and says how to follow it.
func TestTranscriptInterruptedWait(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(home, "errand.yaml"), []byte(
		"agents:\n  slow: {kind: exec, command: [\"sleep\", \"60\"]}\n"), 0o600))
	_, addr := serveBinary(t, home)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, errandBinary(t), "--server", addr, "ask", "--agent", "slow", "--wait", "Wait a minute")
	cmd.Env = transcriptEnv(home)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	var shown strings.Builder
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		shown.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "started") {
			break // it waits now: Ctrl-C
		}
	}
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	for sc.Scan() {
		shown.WriteString(sc.Text() + "\n")
	}
	var ee *exec.ExitError
	require.ErrorAs(t, cmd.Wait(), &ee)
	id := regexp.MustCompile(`tsk_[0-9A-Z]+`).FindString(shown.String())
	require.NotEmpty(t, id)
	out := fmt.Sprintf("--- stderr\n%s--- exit %d\n", stderr.String(), ee.ExitCode())
	golden(t, "ask_interrupted", out, id, "tsk_ID")
	// The task goes on.
	require.Contains(t, transcript(t, home, "--server", addr, "--json", "tasks", "show", id), `"status": "running"`)
}
