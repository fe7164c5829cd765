// Package daemon runs `errand serve`: the store, the worker pool, the HTTP
// API, the heartbeat, webhooks and the inbox, in one process.
package daemon

import (
	"context"
	"errors"
	"io"
)

// Options are the serve command's flags; empty fields take the config
// file's values (or their defaults).
type Options struct {
	ConfigFile string // default $ERRAND_HOME/errand.yaml
	Listen     string
	Store      string
	Workers    int
	LogFormat  string // text (default) or json
	Stderr     io.Writer
	// Lookup reads the environment; nil means os.LookupEnv.
	Lookup func(string) (string, bool)
}

// Run serves until ctx is done (SIGINT/SIGTERM in the CLI), then shuts down
// gracefully.
func Run(ctx context.Context, opts *Options) error {
	return errors.New("errand serve: not built yet")
}
