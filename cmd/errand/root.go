package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"github.com/errandhq/errand/internal/apiclient"
	"github.com/errandhq/errand/internal/config"
)

// Environment variables the CLI reads besides config's.
const (
	envServer  = "ERRAND_SERVER"
	envToken   = "ERRAND_TOKEN"
	envNoColor = "NO_COLOR"
	tokenFile  = "token"
)

// env is what a command reads from outside its arguments; tests fill it
// instead of touching the process environment.
type env struct {
	lookup     func(string) (string, bool)
	stdin      io.Reader
	isTerminal func(w io.Writer) bool
	now        func() time.Time
}

func osEnv() *env {
	return &env{lookup: os.LookupEnv, stdin: os.Stdin, isTerminal: isTerminal, now: time.Now}
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	return isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())
}

// app is one command line's state: its environment, outputs and global
// flags.
type app struct {
	*env
	stdout, stderr io.Writer

	server string // --server
	token  string // --token
	asJSON bool   // --json

	serverFrom string // where the server URL came from, for error messages
	live       bool   // a progress line is drawn on stdout
}

func (a *app) newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "errand",
		Short: "A durable task engine for AI agents",
		Long: `errand keeps tasks for AI agents in a database and runs them in the
background: checkpointed, retried, recovered after crashes, observable.

Start the daemon with "errand serve"; the other commands talk to it. They find
it with --server (or ERRAND_SERVER, else the listen address in
$ERRAND_HOME/errand.yaml, default http://127.0.0.1:7780) and authenticate with
--token (or ERRAND_TOKEN, else the token file the daemon writes in
$ERRAND_HOME, default ~/.errand).`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// --version (-v) is errand version: the same text, and JSON with --json.
	var showVersion bool
	root.Flags().BoolVarP(&showVersion, "version", "v", false, "print the version (errand version)")
	root.RunE = func(cmd *cobra.Command, args []string) error {
		if showVersion {
			return a.printVersion()
		}
		return cmd.Help()
	}
	pf := root.PersistentFlags()
	pf.StringVar(&a.server, "server", "", "daemon URL (default: $"+envServer+", else the config's listen address)")
	pf.StringVar(&a.token, "token", "", "API token (default: $"+envToken+", else $ERRAND_HOME/token)")
	pf.BoolVar(&a.asJSON, "json", false, "print JSON instead of text")
	root.AddCommand(
		newBenchCmd(),
		newBenchWorkerCmd(),
		a.newServeCmd(),
		a.newAskCmd(),
		a.newTasksCmd(),
		a.newStatusCmd(),
		a.newInboxCmd(),
		a.newScheduleCmd(),
		a.newMemoryCmd(),
		a.newExportCmd(),
		a.newImportCmd(),
		a.newGCCmd(),
		a.newBudgetCmd(),
		a.newAgentsCmd(),
		a.newMCPCmd(),
		a.newVersionCmd(),
	)
	guide(root)
	return root
}

// home returns $ERRAND_HOME (default ~/.errand).
func (a *app) home() (string, error) {
	return config.Home(a.lookup)
}

// serverURL resolves the daemon's address: --server, $ERRAND_SERVER, then
// fallback (a live daemon's heartbeat) if not empty, then the config's
// listen address.
func (a *app) serverURL(fallback string) (string, error) {
	switch {
	case a.server != "":
		a.serverFrom = "--server"
		return normalizeURL(a.server), nil
	}
	if v, ok := a.lookup(envServer); ok && v != "" {
		a.serverFrom = envServer
		return normalizeURL(v), nil
	}
	if fallback != "" {
		a.serverFrom = "heartbeat"
		return normalizeURL(fallback), nil
	}
	cfg, err := config.LoadEnv("", a.lookup)
	if err != nil {
		return "", fmt.Errorf("find the daemon: %w", err)
	}
	a.serverFrom = "config"
	return cfg.ServerURL(), nil
}

// normalizeURL accepts host:port as well as a URL.
func normalizeURL(s string) string {
	s = strings.TrimRight(strings.TrimSpace(s), "/")
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	return s
}

// apiToken resolves the token: --token, $ERRAND_TOKEN, then
// $ERRAND_HOME/token. No token is not an error here: the daemon answers
// 401, and describe says where a token comes from.
func (a *app) apiToken() (string, error) {
	if a.token != "" {
		return a.token, nil
	}
	if v, ok := a.lookup(envToken); ok && v != "" {
		return v, nil
	}
	home, err := a.home()
	if err != nil {
		return "", nil
	}
	data, err := os.ReadFile(filepath.Join(home, tokenFile))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read token: %w", err)
	}
	return strings.TrimSpace(string(data)), nil
}

// client returns an API client for the daemon.
func (a *app) client() (*apiclient.Client, error) {
	return a.clientFor("")
}

// clientFor is client with a fallback address (see serverURL).
func (a *app) clientFor(fallback string) (*apiclient.Client, error) {
	base, err := a.serverURL(fallback)
	if err != nil {
		return nil, err
	}
	token, err := a.apiToken()
	if err != nil {
		return nil, err
	}
	return apiclient.New(base, token, newHTTPClient()), nil
}

// newHTTPClient has no overall timeout, which would cut event streams;
// a daemon that accepts but never answers is caught by the header timeout.
func newHTTPClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	tr.ResponseHeaderTimeout = 60 * time.Second
	tr.Proxy = nil // the daemon is local, or named explicitly
	return &http.Client{Transport: tr}
}

// describe turns a command's error into the message printed on stderr; ""
// prints nothing.
func (a *app) describe(err error) string {
	if err == nil {
		return ""
	}
	var ee *exitError
	if errors.As(err, &ee) && ee.err == nil {
		return ""
	}
	var (
		ue  *apiclient.UnreachableError
		ae  *apiclient.Error
		msg string
	)
	switch {
	case errors.As(err, &ue):
		msg = fmt.Sprintf("cannot reach the daemon at %s: is `errand serve` running? (%v)", ue.URL, ue.Err)
	case errors.As(err, &ae) && ae.Status == http.StatusUnauthorized:
		msg = fmt.Sprintf("the daemon refused the token (HTTP 401: %s); pass --token, set %s, or check $ERRAND_HOME/%s",
			cmp.Or(ae.Message, "unauthorized"), envToken, tokenFile)
	case errors.Is(err, context.Canceled):
		msg = "interrupted"
	default:
		msg = err.Error()
	}
	return oneErrandPrefix(msg)
}

// color reports whether output to stdout may use colours: it is a terminal
// and NO_COLOR is unset (or empty), and TERM is not dumb.
func (a *app) color() bool {
	if v, ok := a.lookup(envNoColor); ok && v != "" {
		return false
	}
	if v, _ := a.lookup("TERM"); v == "dumb" {
		return false
	}
	return a.isTerminal(a.stdout)
}

// tty reports whether stdout is a terminal (a live progress line may be
// redrawn on it).
func (a *app) tty() bool {
	if v, _ := a.lookup("TERM"); v == "dumb" {
		return false
	}
	return a.isTerminal(a.stdout)
}

// clearLine erases a live progress line before other output.
func (a *app) clearLine() {
	if a.live {
		io.WriteString(a.stdout, "\r\x1b[K")
		a.live = false
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
