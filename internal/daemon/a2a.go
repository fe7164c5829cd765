package daemon

import (
	"context"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/a2a"
	"github.com/errandhq/errand/internal/config"
	"github.com/errandhq/errand/internal/version"
	"github.com/errandhq/errand/internal/webhook"
)

// a2aService is errand serve's A2A side: the JSON-RPC endpoint, the
// agent cards and the dispatcher of push notifications.
type a2aService struct {
	handler, cards http.Handler
	push           *webhook.PushDispatcher
}

// a2aPushLeaseTTL is how long the push dispatcher's lease lasts unless
// renewed.
const a2aPushLeaseTTL = 30 * time.Second

// a2aOptions tune the A2A side; the zero value is the default.
type a2aOptions struct {
	// BaseURL is where clients reach errand, for the card; empty: each
	// request's own host.
	BaseURL string
	// AllowPrivate lets push configs name loopback and private addresses.
	AllowPrivate bool
	// Traces, when errand exports traces: a submit's traceparent parents
	// its run, and pushes carry the run's trace.
	Traces trace.TracerProvider
}

// newA2A serves A2A over client: the card lists cfg's agents as skills,
// and messages that name no agent go to the default one (see
// a2aDefaultAgent). Streams end when ctx does.
func newA2A(ctx context.Context, client *errand.Client, cfg *config.Config, opts a2aOptions, log *slog.Logger) (*a2aService, error) {
	var skills []a2a.Skill
	for _, name := range slices.Sorted(maps.Keys(cfg.Agents)) {
		kind := cfg.Agents[name].Kind
		// The card is open: it says what kind each agent is, never its
		// model, command or endpoint.
		skills = append(skills, a2a.Skill{ID: name, Description: "an errand " + kind + " agent", Tags: []string{kind}})
	}
	srv, err := a2a.New(a2a.Config{
		Client: client, Skills: skills, DefaultAgent: a2aDefaultAgent(cfg),
		BaseURL: opts.BaseURL, AllowPrivate: opts.AllowPrivate, Done: ctx.Done(), Logger: log,
		Version: version.String(), Traces: opts.Traces != nil,
	})
	if err != nil {
		return nil, err
	}
	push, err := webhook.NewPush(webhook.PushConfig{
		Source: srv.PushSource(), Journal: webhook.ClientJournal(client), AllowPrivate: opts.AllowPrivate, Logger: log,
		TracerProvider: opts.Traces,
		// Pushes can wait a little for another daemon to take over: renew
		// the lease every 10 s, not every 1.7 s, on an idle store.
		LeaseTTL: a2aPushLeaseTTL,
	})
	if err != nil {
		return nil, err
	}
	return &a2aService{handler: srv.Handler(), cards: srv.Cards(), push: push}, nil
}

// a2aDefaultAgent runs the A2A messages that name no agent: the one the
// config names, else the agent named default, else the only agent
// configured, else default still (whose tasks fail saying how to
// configure it).
func a2aDefaultAgent(cfg *config.Config) string {
	if cfg.A2A.DefaultAgent != "" {
		return cfg.A2A.DefaultAgent
	}
	if _, ok := cfg.Agents[a2a.DefaultAgent]; !ok && len(cfg.Agents) == 1 {
		for name := range cfg.Agents {
			return name
		}
	}
	return a2a.DefaultAgent
}
