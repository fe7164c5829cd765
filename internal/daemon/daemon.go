// Package daemon runs `errand serve`: the store, the worker pool, the HTTP
// API, the heartbeat, webhooks and metrics, in one process.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/internal/config"
	"github.com/errandhq/errand/internal/dashboard"
	"github.com/errandhq/errand/internal/heartbeat"
	"github.com/errandhq/errand/internal/id"
	"github.com/errandhq/errand/internal/metrics"
	"github.com/errandhq/errand/internal/server"
	"github.com/errandhq/errand/internal/telemetry"
	"github.com/errandhq/errand/internal/version"
	"github.com/errandhq/errand/internal/webhook"
)

// Options are the serve command's flags; empty fields take the config
// file's values (or their defaults).
type Options struct {
	ConfigFile string // default $ERRAND_HOME/errand.yaml
	Listen     string
	Store      string
	Workers    int
	LogFormat  string // text (default) or json
	// SkipIntegrityCheck skips the check of the SQLite file at start.
	SkipIntegrityCheck bool
	Stderr             io.Writer
	// Lookup reads the environment; nil means os.LookupEnv.
	Lookup func(string) (string, bool)
	// Ready, when set, is called once the API is listening, with its
	// address.
	Ready func(addr net.Addr)
	// Reload, when set, makes the daemon read the config again each time
	// it receives (the CLI sends SIGHUP) and apply it: the file, the
	// ERRAND_* variables and these options, as at start. A bad file, or
	// schedules the engine refuses, is logged and the running schedules
	// stay. schedules:, the spend limits of budget:, concurrency: and
	// rate_limits: are applied; other changes need a restart.
	Reload <-chan os.Signal
	// ReloadedFunc, when set, is called after each reload with its
	// outcome: nil, or why nothing changed.
	ReloadedFunc func(err error)
}

// shutdownGrace bounds how long a stopping daemon waits for running steps
// before handing their tasks back.
const shutdownGrace = 10 * time.Second

// Run serves until ctx is done (SIGINT/SIGTERM in the CLI), then shuts down
// gracefully. Any problem found at start-up — a bad config key, a port in
// use, an unreadable store — is returned before anything is served.
func Run(ctx context.Context, opts *Options) error {
	d, err := start(ctx, opts)
	if err != nil {
		return err
	}
	return d.serve(ctx)
}

// daemon is one running errand serve.
type daemon struct {
	home      string
	cfg       *config.Config
	cfgPath   string
	log       *slog.Logger
	startedAt time.Time

	listener net.Listener
	client   *errand.Client
	engine   *errand.Engine
	api      *server.Server
	http     *http.Server
	metrics  *metrics.Metrics
	traces   *telemetry.Provider // nil unless traces are exported
	hooks    *webhook.Dispatcher
	a2a      *a2aService
	ready    func(net.Addr)
	unlock   func()

	// opts and lookup are kept to read the config again on reload.
	opts     *Options
	lookup   func(string) (string, bool)
	reload   <-chan os.Signal
	reloaded func(error)
}

func start(ctx context.Context, opts *Options) (d *daemon, err error) {
	if opts == nil {
		opts = &Options{}
	}
	lookup := opts.Lookup
	if lookup == nil {
		lookup = os.LookupEnv
	}
	stderr := opts.Stderr
	if stderr == nil {
		stderr = os.Stderr
	}
	log, err := newLogger(stderr, opts.LogFormat)
	if err != nil {
		return nil, err
	}
	home, err := config.Home(lookup)
	if err != nil {
		return nil, err
	}
	cfg, cfgPath, err := loadConfig(home, opts, lookup)
	if err != nil {
		return nil, err
	}
	if err := checkAgentEnv(cfg, lookup); err != nil {
		return nil, err
	}
	if err := checkMCPEnv(cfg, lookup); err != nil {
		return nil, err
	}
	hooks, err := webhook.HooksFromConfig(cfg.Webhooks, lookup)
	if err != nil {
		return nil, fmt.Errorf("webhooks: %w", err)
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	unlock, err := lockHome(home)
	if err != nil {
		return nil, err
	}
	d = &daemon{
		home: home, cfg: cfg, cfgPath: cfgPath, log: log, startedAt: time.Now(), ready: opts.Ready, unlock: unlock,
		opts: opts, lookup: lookup, reload: opts.Reload, reloaded: opts.ReloadedFunc,
	}
	defer func(d *daemon) {
		if err != nil {
			d.close()
		}
	}(d)

	token, err := loadToken(home, cfg, lookup)
	if err != nil {
		return nil, err
	}

	if d.traces, err = startTelemetry(ctx, cfg, lookup, log); err != nil {
		return nil, err
	}
	// Listen first: a port in use stops us before any work is claimed.
	if d.listener, err = listen(ctx, home, cfg.Listen); err != nil {
		return nil, err
	}
	d.metrics = metrics.New(func(ctx context.Context) (map[errand.Status]int, error) {
		return d.client.CountByStatus(ctx)
	})
	// A heartbeat's prompt_file is relative to the config file.
	baseDir, err := filepath.Abs(filepath.Dir(cfgPath))
	if err != nil {
		return nil, fmt.Errorf("config directory: %w", err)
	}
	clientCfg := &errand.Config{
		Durability:      cfg.Durability,
		LeaseTTL:        time.Duration(cfg.LeaseTTL),
		MaxSubtaskDepth: cfg.MaxSubtaskDepth,
		SessionLanes:    cfg.Lanes == "session",
		Concurrency:     cfg.Concurrency,
		RateLimits:      rateLimits(cfg.RateLimits),
		Retention:       time.Duration(cfg.Retention),
		MemoryRetention: time.Duration(cfg.MemoryRetention),
		OnPurged: func(taskIDs []string) {
			if err := RemoveArtifacts(home, taskIDs); err != nil {
				log.Warn("remove artifacts of purged tasks", "err", err)
			}
		},
		BaseDir:         baseDir,
		OnScheduleFired: d.metrics.ScheduleFired,
		Logger:          log,

		SkipIntegrityCheck: opts.SkipIntegrityCheck,
	}
	clientCfg.TracerProvider = d.tracerProvider()
	if _, statErr := os.Stat(cfgPath); statErr == nil {
		clientCfg.ConfigFile = cfgPath
	}
	dbPath, _ := config.SQLitePath(cfg.StoreDSN(home))
	warnIfExposed(log, home, dbPath)
	if d.client, err = errand.Open(ctx, cfg.StoreDSN(home), clientCfg); err != nil {
		return nil, ExplainStoreError(err)
	}
	logMCPServers(log, cfg)
	if _, ok := cfg.Agents["default"]; !ok {
		if err = d.client.RegisterAgent("default", unconfiguredAgent(cfgPath)); err != nil {
			return nil, err
		}
	}
	if err := d.applyBudget(ctx, cfg); err != nil {
		return nil, err
	}
	// With every agent known, so that templates naming one check.
	ch, err := d.applySchedules(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if len(cfg.Schedules) > 0 || len(ch.removed) > 0 {
		log.Info("applied the config's schedules", "schedules", len(cfg.Schedules),
			"added", ch.added, "replaced", ch.replaced, "removed", ch.removed)
	}
	tracer := d.tracerProvider()
	if len(hooks) > 0 {
		d.hooks, err = webhook.New(webhook.Config{
			Hooks: hooks, Journal: webhook.ClientJournal(d.client), Logger: log,
			OnAttemptFunc:  func(_ string, _ int64, err error) { d.metrics.WebhookAttempt(err) },
			TracerProvider: tracer,
		})
		if err != nil {
			return nil, fmt.Errorf("webhooks: %w", err)
		}
	}
	if d.engine, err = errand.NewEngine(d.client, &errand.EngineConfig{Workers: cfg.Workers, ShutdownGrace: shutdownGrace}); err != nil {
		return nil, err
	}
	board, err := dashboard.New(dashboard.Config{
		Client: d.client, Token: token, Status: d.status, Workers: cfg.Workers, Home: d.home, Logger: log,
	})
	if err != nil {
		return nil, err
	}
	if d.a2a, err = newA2A(ctx, d.client, cfg, a2aOptions{BaseURL: cfg.A2A.BaseURL, AllowPrivate: cfg.A2A.PushAllowPrivate, Traces: tracer}, log); err != nil {
		return nil, fmt.Errorf("a2a: %w", err)
	}
	d.api = server.New(server.Config{
		Client:           d.client,
		Dashboard:        board,
		A2A:              d.a2a.handler,
		A2ACards:         d.a2a.cards,
		Token:            token,
		Metrics:          d.metrics.Handler(),
		MetricsNeedToken: cfg.Auth.ProtectMetrics,
		Status:           d.status,
		Health:           d.client.CheckWritable,
		PublicURL:        cfg.A2A.BaseURL,
		Traces:           d.traces != nil,
		MCP:              mcpHandler(d.client, log, d.traces != nil),
		OnStream: func(open bool) {
			if open {
				d.metrics.StreamOpened()
			} else {
				d.metrics.StreamClosed()
			}
		},
		Logger: log,
	})
	d.http = &http.Server{
		Handler:           d.api.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	return d, nil
}

// serve runs every part until ctx is done or one part fails, then stops
// them in order: no new requests, no new claims, running steps get their
// grace period, the heartbeat file goes last.
func (d *daemon) serve(ctx context.Context) error {
	defer d.close()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// The observer starts where the journal is now, before any task runs.
	observeFrom, err := d.client.LastEventID(ctx)
	if err != nil {
		return fmt.Errorf("read the journal: %w", err)
	}
	// The engine recovers leases of dead local owners as it starts. It is
	// not tied to ctx: a signal stops it through Stop, with a grace period
	// for running steps, not at once.
	if err := d.engine.Start(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("start workers: %w", err)
	}
	addr := d.listener.Addr().String()

	var wg sync.WaitGroup
	fail := func(what string, err error) {
		if err != nil && !errors.Is(err, context.Canceled) {
			cancel(fmt.Errorf("%s: %w", what, err))
		}
	}
	partsCtx, stopParts := context.WithCancel(context.WithoutCancel(ctx))
	defer stopParts()
	wg.Go(func() {
		if err := d.http.Serve(d.api.Listener(d.listener)); !errors.Is(err, http.ErrServerClosed) {
			fail("http", err)
		}
	})
	beat := &heartbeat.Writer{
		Path:      filepath.Join(d.home, heartbeat.FileName),
		Interval:  time.Duration(d.cfg.HeartbeatInterval),
		Listen:    addr,
		StartedAt: d.startedAt,
		Logger:    d.log,
		InfoFunc:  d.counts,
	}
	beatStarted := make(chan struct{})
	beat.StartedFunc = func() { close(beatStarted) }
	beatDone := make(chan struct{})
	beatCtx, stopBeat := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBeat()
	go func() {
		defer close(beatDone)
		fail("heartbeat", beat.Run(beatCtx))
	}()
	if d.hooks != nil {
		wg.Go(func() { fail("webhooks", d.hooks.Run(partsCtx)) })
	}
	wg.Go(func() { fail("a2a push notifications", d.a2a.push.Run(partsCtx)) })
	wg.Go(func() { d.observe(partsCtx, observeFrom) })
	if d.reload != nil {
		wg.Go(func() { d.reloadLoop(partsCtx) })
	}
	select {
	case <-beatStarted:
		tokenKey, tokenFrom := d.tokenSource()
		d.log.Info("errand serving", "listen", addr, "dashboard", dashboardURL(d.listener.Addr()), tokenKey, tokenFrom,
			"home", d.home, "config", d.cfgPath, "store", redactDSN(d.cfg.StoreDSN(d.home)), "workers", d.cfg.Workers,
			"pid", os.Getpid(), "version", version.String())
		if d.ready != nil {
			d.ready(d.listener.Addr())
		}
	case <-ctx.Done():
	}

	<-ctx.Done()
	cause := context.Cause(ctx)
	if errors.Is(cause, context.Canceled) {
		cause = nil
		d.log.Info("shutting down")
	} else {
		d.log.Error("stopping after a failure", "err", cause)
	}

	shutdownCtx, done := context.WithTimeout(context.Background(), shutdownGrace+5*time.Second)
	defer done()
	d.api.CloseStreams()
	if err := d.http.Shutdown(shutdownCtx); err != nil {
		d.http.Close()
	}
	d.api.WaitStreams() // WebSockets are hijacked: Shutdown does not wait for them
	if err := d.engine.Stop(shutdownCtx); err != nil {
		d.log.Warn("workers stopped uncleanly", "err", err)
	}
	d.stopTraces(shutdownCtx)
	stopParts()
	wg.Wait()
	stopBeat()
	<-beatDone
	return cause
}

// observe follows the journal for metrics and artifacts from event after.
// A failed read is logged and the subscription resumed where it stopped:
// metrics are not worth stopping the daemon for.
func (d *daemon) observe(ctx context.Context, after int64) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		sub, err := d.client.Subscribe(ctx, errand.EventFilter{}, after)
		if err == nil {
			for ev := range sub.Events() {
				after = ev.ID
				backoff = 100 * time.Millisecond
				d.metrics.Observe(ev)
				if ev.Type == errand.EventTaskCompleted {
					d.writeArtifact(ctx, ev.TaskID)
				}
			}
			err = sub.Err()
		}
		if ctx.Err() != nil {
			return
		}
		d.log.Warn("following the journal failed; resuming", "after", after, "err", err, "retry_in", backoff)
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

// RemoveArtifacts removes the artifacts of tasks purged past retention
// from home.
func RemoveArtifacts(home string, taskIDs []string) error {
	for _, taskID := range taskIDs {
		if !id.Valid(id.Task, taskID) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(home, "artifacts", taskID)); err != nil {
			return err
		}
	}
	return nil
}

// writeArtifact saves a completed task's output as
// artifacts/<task_id>/output.md, readable without errand.
func (d *daemon) writeArtifact(ctx context.Context, taskID string) {
	if !id.Valid(id.Task, taskID) {
		return // never a path outside artifacts/
	}
	t, err := d.client.Get(ctx, taskID)
	if err != nil || len(t.Result) == 0 {
		return
	}
	dir := filepath.Join(d.home, "artifacts", taskID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		d.log.Warn("write artifact", "task", taskID, "err", err)
		return
	}
	text := api.ResultText(t.Result)
	body := "# " + t.Title + "\n\n" + text + "\n"
	if err := os.WriteFile(filepath.Join(dir, "output.md"), []byte(body), 0o600); err != nil {
		d.log.Warn("write artifact", "task", taskID, "err", err)
	}
}

// tokenSource says where the API token (the dashboard's password) is,
// never the token itself: the key token_env and the variable's name, or
// token_file and the file's path.
func (d *daemon) tokenSource() (key, where string) {
	if name := d.cfg.Auth.TokenEnv; name != "" {
		return "token_env", name
	}
	return "token_file", filepath.Join(d.home, TokenFile)
}

// dashboardURL is the dashboard's address for a listener on addr; an
// unspecified host (0.0.0.0, ::) is reached on the loopback address.
func dashboardURL(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "http://" + addr.String() + "/"
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip.To4() == nil {
			host = "::1"
		}
	}
	return "http://" + net.JoinHostPort(host, port) + "/"
}

func (d *daemon) counts(ctx context.Context) (map[string]int, error) {
	counts, err := d.client.CountByStatus(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]int, len(errand.AllStatuses))
	for _, st := range errand.AllStatuses {
		out[string(st)] = counts[st]
	}
	return out, nil
}

func (d *daemon) status(ctx context.Context) (*api.Status, error) {
	counts, err := d.counts(ctx)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	guard, err := d.client.SpendGuard(ctx)
	if err != nil {
		return nil, err
	}
	spend := guard.SpentDay
	started := d.startedAt.UTC()
	return &api.Status{
		State:         string(heartbeat.StateAlive),
		PID:           os.Getpid(),
		StartedAt:     &started,
		Uptime:        now.Sub(d.startedAt).Round(time.Second).String(),
		Tasks:         counts,
		SpendTodayUSD: spend,
	}, nil
}

func (d *daemon) close() {
	d.stopTraces(context.Background())
	if d.listener != nil {
		d.listener.Close()
	}
	if d.client != nil {
		d.client.Close()
	}
	if d.unlock != nil {
		d.unlock()
	}
}

func newLogger(w io.Writer, format string) (*slog.Logger, error) {
	switch format {
	case "", "text":
		return slog.New(slog.NewTextHandler(w, nil)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, nil)), nil
	default:
		return nil, fmt.Errorf("--log-format: %q is not text or json", format)
	}
}

// loadConfig reads errand.yaml (the named file, which must exist, or the
// one in home, which may not), the ERRAND_* variables, then the flags,
// and validates the result.
func loadConfig(home string, opts *Options, lookup func(string) (string, bool)) (*config.Config, string, error) {
	path := opts.ConfigFile
	if path == "" {
		path = filepath.Join(home, config.FileName)
	}
	cfg, err := config.LoadEnv(opts.ConfigFile, lookup)
	if err != nil {
		return nil, "", err
	}
	if opts.Listen != "" {
		cfg.Listen = opts.Listen
	}
	if opts.Store != "" {
		cfg.Store = opts.Store
	}
	if opts.Workers != 0 {
		cfg.Workers = opts.Workers
	}
	if err := cfg.Validate(); err != nil {
		return nil, "", fmt.Errorf("config (after flags): %w", err)
	}
	if cfg.Auth.TokenEnv == "" && !config.IsLoopback(cfg.Listen) {
		return nil, "", fmt.Errorf("refusing to listen on %s, which is not a loopback address, without auth.token_env: "+
			"set auth.token_env in %s to the name of an environment variable holding the API token, or listen on 127.0.0.1", cfg.Listen, path)
	}
	return cfg, path, nil
}

// checkAgentEnv refuses, before anything is created, agents whose API key
// or token variable is not set.
func checkAgentEnv(cfg *config.Config, lookup func(string) (string, bool)) error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(cfg.Agents)) {
		a := cfg.Agents[name]
		key, env, drop := "api_key_env", a.APIKeyEnv, "drop api_key_env for a server that needs no key"
		if a.Kind == config.KindA2A {
			key, env, drop = "token_env", a.TokenEnv, "drop token_env for an agent that needs no token"
		}
		if env == "" {
			continue
		}
		if v, _ := lookup(env); strings.TrimSpace(v) == "" {
			errs = append(errs, fmt.Errorf("agents.%s.%s names %s, which is not set: export it before errand serve, or %s", name, key, env, drop))
		}
	}
	return errors.Join(errs...)
}

func redactDSN(dsn string) string {
	if i := strings.Index(dsn, "@"); i > 0 && strings.Contains(dsn, "://") {
		scheme, _, _ := strings.Cut(dsn, "://")
		return scheme + "://…" + dsn[i:]
	}
	return dsn
}

// rateLimits is the config's rate_limits as errand takes them; nil when
// there are none.
func rateLimits(in map[string]config.RateLimit) map[string]errand.RateLimit {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]errand.RateLimit, len(in))
	for model, l := range in {
		out[model] = errand.RateLimit{RequestsPerMinute: l.RequestsPerMinute, TokensPerMinute: l.TokensPerMinute}
	}
	return out
}
