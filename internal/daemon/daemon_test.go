package daemon

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/internal/apiclient"
	"github.com/errandhq/errand/internal/config"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

// serve runs the daemon until the test ends and returns its address.
func serve(t *testing.T, home string, vars map[string]string) string {
	t.Helper()
	vars["ERRAND_HOME"] = home
	ready := make(chan net.Addr, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, &Options{Listen: "127.0.0.1:0", Lookup: env(vars), Stderr: io.Discard, Ready: func(a net.Addr) { ready <- a }})
	}()
	var addr net.Addr
	select {
	case addr = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("daemon did not start: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
		_, err := os.Stat(filepath.Join(home, "heartbeat.json"))
		require.ErrorIs(t, err, os.ErrNotExist, "a clean stop removes the heartbeat")
	})
	return "http://" + addr.String()
}

func TestStartsWithNoConfigAndExplainsTheMissingModel(t *testing.T) {
	home := t.TempDir()
	url := serve(t, home, map[string]string{})

	token, err := os.ReadFile(filepath.Join(home, TokenFile))
	require.NoError(t, err)
	info, err := os.Stat(filepath.Join(home, TokenFile))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	_, err = os.Stat(filepath.Join(home, "heartbeat.json"))
	require.NoError(t, err, "the heartbeat is written at start-up")

	c := apiclient.New(url, strings.TrimSpace(string(token)), nil)
	task, err := c.CreateTask(t.Context(), &api.CreateTask{Goal: "hello"})
	require.NoError(t, err)
	waitEvent(t, c, task.ID, "task.failed")
	task, err = c.GetTask(t.Context(), task.ID)
	require.NoError(t, err)
	require.Equal(t, "agent_not_configured", task.Error.Code)
	require.Contains(t, task.Error.Message, "agents.default")
	require.Contains(t, task.Error.Message, "model:")
	require.Contains(t, task.Error.Message, filepath.Join(home, "errand.yaml"))

	// The token survives a restart: the same file is read again.
	again, err := loadToken(home, mustDefault(t), env(nil))
	require.NoError(t, err)
	require.Equal(t, strings.TrimSpace(string(token)), again)
}

func TestBadStartsServeNothing(t *testing.T) {
	cases := []struct {
		name, config string
		opts         Options
		vars         map[string]string
		want         string
	}{
		{name: "unknown key", config: "workerz: 4\n", want: "workerz: unknown key"},
		{name: "bad value", config: "lease_ttl: 90\n", want: "lease_ttl"},
		{name: "bad agent", config: "agents:\n  default: {kind: llm}\n", want: "agents.default.model"},
		{name: "bad flag", opts: Options{Workers: -1}, want: "workers"},
		{name: "bad env", vars: map[string]string{"ERRAND_WORKERS": "many"}, want: "ERRAND_WORKERS"},
		{name: "open without token", opts: Options{Listen: "0.0.0.0:0"}, want: "auth.token_env"},
		{name: "token env unset", config: "auth: {token_env: MY_TOKEN}\n", want: "MY_TOKEN"},
		{name: "api key unset", config: "agents:\n  default: {kind: llm, model: m, api_key_env: NOPE_KEY}\n", want: "agents.default.api_key_env names NOPE_KEY, which is not set"},
		{name: "webhook secret unset", config: "webhooks:\n  - {url: 'https://example.com/h', secret_env: HOOK_SECRET}\n", want: "HOOK_SECRET"},
		{name: "log format", opts: Options{LogFormat: "xml"}, want: "--log-format"},
		{name: "missing named config", opts: Options{ConfigFile: "/nonexistent/errand.yaml"}, want: "/nonexistent/errand.yaml"},
		{name: "bad schedule", config: "schedules:\n  nightly: {kind: hourly, task: {goal: g}}\n", want: `schedules.nightly.kind: "hourly" is not cron, interval, event or heartbeat`},
		{name: "unknown schedule key", config: "schedules:\n  nightly: {kind: cron, spec: '@daily', task: {goal: g, agnet: a}}\n", want: "schedules.nightly.task.agnet: unknown key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			home := t.TempDir()
			if c.config != "" {
				require.NoError(t, os.WriteFile(filepath.Join(home, "errand.yaml"), []byte(c.config), 0o600))
			}
			vars := map[string]string{"ERRAND_HOME": home}
			for k, v := range c.vars {
				vars[k] = v
			}
			opts := c.opts
			opts.Lookup = env(vars)
			opts.Stderr = io.Discard
			if opts.Listen == "" {
				opts.Listen = "127.0.0.1:0"
			}
			err := Run(t.Context(), &opts)
			require.ErrorContains(t, err, c.want)
			_, statErr := os.Stat(filepath.Join(home, "errand.db"))
			require.ErrorIs(t, statErr, os.ErrNotExist, "no store was created")
			_, statErr = os.Stat(filepath.Join(home, "heartbeat.json"))
			require.ErrorIs(t, statErr, os.ErrNotExist)
			_, statErr = os.Stat(filepath.Join(home, TokenFile))
			require.ErrorIs(t, statErr, os.ErrNotExist, "nothing was written")
		})
	}
}

func TestPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	home := t.TempDir()
	err = Run(t.Context(), &Options{Listen: ln.Addr().String(), Lookup: env(map[string]string{"ERRAND_HOME": home}), Stderr: io.Discard})
	require.ErrorContains(t, err, "listen on "+ln.Addr().String())
}

func TestTokenFromEnvironmentAllowsNonLoopback(t *testing.T) {
	home := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(home, "errand.yaml"), []byte("auth: {token_env: MY_TOKEN}\n"), 0o600))
	cfg, _, err := loadConfig(home, &Options{Listen: "0.0.0.0:7780"}, env(map[string]string{"ERRAND_HOME": home}))
	require.NoError(t, err)
	token, err := loadToken(home, cfg, env(map[string]string{"MY_TOKEN": " chosen "}))
	require.NoError(t, err)
	require.Equal(t, "chosen", token)
	_, err = os.Stat(filepath.Join(home, TokenFile))
	require.ErrorIs(t, err, os.ErrNotExist, "a token from the environment is not written to disk")
}

func TestTokenFileIsMadePrivate(t *testing.T) {
	home := t.TempDir()
	path := filepath.Join(home, TokenFile)
	require.NoError(t, os.WriteFile(path, []byte("abc\n"), 0o644))
	token, err := loadToken(home, mustDefault(t), env(nil))
	require.NoError(t, err)
	require.Equal(t, "abc", token)
	info, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())

	require.NoError(t, os.WriteFile(path, []byte("\n"), 0o600))
	_, err = loadToken(home, mustDefault(t), env(nil))
	require.ErrorContains(t, err, "empty")
}

func mustDefault(t *testing.T) *config.Config {
	t.Helper()
	return config.Default()
}

// lineWatcher signals when a log line containing want is written.
type lineWatcher struct {
	want string
	seen chan struct{}
	once sync.Once
}

func (l *lineWatcher) Write(p []byte) (int, error) {
	if strings.Contains(string(p), l.want) {
		l.once.Do(func() { close(l.seen) })
	}
	return len(p), nil
}

// TestShutdownLetsRunningStepsFinish: a signal stops the claiming, but a
// step already running gets its grace period and its task completes.
func TestShutdownLetsRunningStepsFinish(t *testing.T) {
	home := t.TempDir()
	release := filepath.Join(home, "release")
	started := filepath.Join(home, "started")
	script := "#!/bin/sh\ncat >/dev/null\ntouch " + started + "\nwhile [ ! -f " + release + " ]; do sleep 0.01; done\nprintf '{\"status\":\"finish\",\"output\":\"finished in the grace period\"}\\n'\n"
	require.NoError(t, os.WriteFile(filepath.Join(home, "step.sh"), []byte(script), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(home, "errand.yaml"),
		[]byte("agents:\n  default: {kind: exec, command: ["+strconv.Quote(filepath.Join(home, "step.sh"))+"]}\n"), 0o600))

	ready := make(chan net.Addr, 1)
	stopping := &lineWatcher{want: "shutting down", seen: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, &Options{Listen: "127.0.0.1:0", Lookup: env(map[string]string{"ERRAND_HOME": home}),
			Stderr: stopping, Ready: func(a net.Addr) { ready <- a }})
	}()
	url := "http://" + (<-ready).String()
	token, err := os.ReadFile(filepath.Join(home, TokenFile))
	require.NoError(t, err)
	c := apiclient.New(url, strings.TrimSpace(string(token)), nil)
	task, err := c.CreateTask(t.Context(), &api.CreateTask{Goal: "slow"})
	require.NoError(t, err)
	waitEvent(t, c, task.ID, "task.started") // the step runs: now signal
	cancel()
	<-stopping.seen
	require.NoError(t, os.WriteFile(release, nil, 0o600))
	require.NoError(t, <-done)

	db, err := errand.Open(context.Background(), filepath.Join(home, "errand.db"), nil)
	require.NoError(t, err)
	defer db.Close()
	got, err := db.Get(context.Background(), task.ID)
	require.NoError(t, err)
	require.Equal(t, errand.StatusCompleted, got.Status, "the step finished within the grace period")
}

func TestOneDaemonPerHome(t *testing.T) {
	home := t.TempDir()
	serve(t, home, map[string]string{})
	err := Run(t.Context(), &Options{Listen: "127.0.0.1:0", Lookup: env(map[string]string{"ERRAND_HOME": home}), Stderr: io.Discard})
	require.ErrorContains(t, err, "another errand serve (pid ")
}

// waitEvent follows a task's events until one of type typ.
func waitEvent(t *testing.T, c *apiclient.Client, taskID, typ string) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	for ev, err := range c.Events(ctx, apiclient.EventsPath(taskID), 0) {
		require.NoError(t, err)
		if ev.Type == typ {
			return
		}
	}
}
