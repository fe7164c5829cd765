// Package dashboard is errand's web dashboard at /: server-rendered pages
// over the same errand.Client the API uses, with live updates over
// Server-Sent Events.
//
// # Technology
//
// Go html/template renders every page; htmx (vendored under static/vendor,
// pinned by version and SHA-256, see vendor.json) swaps the parts that
// change and its SSE extension listens for changes. There is no build
// step and no inline script, so the Content-Security-Policy allows
// scripts and styles from this origin only. Every page works without
// JavaScript too, only without live updates and confirmations.
//
// # Auth
//
// The API token logs in once (POST /login) and becomes a signed session
// cookie (HttpOnly, SameSite=Strict) whose key is derived from the token
// and a secret drawn at start: a new token, or a restart, ends every
// session. Logging out ends the session on the server too: an old copy of
// its cookie is refused. The cookie's name is the daemon's own (a hash of
// its data directory and token), as browsers send a host's cookies to
// all its ports. Every state-changing request carries
// the session's CSRF token (a form field, or X-CSRF-Token from htmx) and
// must come from this origin (Sec-Fetch-Site). Text from tasks (goals,
// results, questions, errors) is only ever rendered as text.
package dashboard

import (
	"bytes"
	"context"
	"crypto/subtle"
	"embed"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/internal/clock"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// contentSecurityPolicy allows this origin's scripts, styles and
// connections only: no inline script or style, no frames, no plugins.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// DefaultSessionTTL is how long a login lasts.
const DefaultSessionTTL = 12 * time.Hour

// Config wires a Dashboard.
type Config struct {
	Client *errand.Client
	// Token is the API token; it logs in. Empty refuses every login.
	Token      string
	SessionTTL time.Duration
	// Status, when set, tells the health page how the daemon is; Workers
	// is how many it runs.
	Status  func(ctx context.Context) (*api.Status, error)
	Workers int
	// Home is the data directory; the task page shows a task's
	// artifacts/<task>/output.md from it. Empty shows none.
	Home   string
	Clock  clock.Clock
	Logger *slog.Logger
}

// Dashboard serves the pages. Create one with New.
type Dashboard struct {
	cfg      Config
	client   *errand.Client
	log      *slog.Logger
	sessions *sessions
	pages    map[string]*template.Template
	mux      *http.ServeMux
}

// New returns the dashboard for cfg.
func New(cfg Config) (*Dashboard, error) {
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = DefaultSessionTTL
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.New()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	d := &Dashboard{
		cfg: cfg, client: cfg.Client, log: cfg.Logger,
		sessions: newSessions(cfg.Token, cfg.SessionTTL, cfg.Clock.Now).forDaemon(cfg.Home),
		mux:      http.NewServeMux(),
	}
	if err := d.parseTemplates(); err != nil {
		return nil, err
	}
	d.routes()
	return d, nil
}

// ServeHTTP serves every dashboard path; the server mounts it at /.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	d.mux.ServeHTTP(w, r)
}

func (d *Dashboard) routes() {
	static, _ := fs.Sub(staticFS, "static")
	files := http.StripPrefix("/static/", http.FileServerFS(static))
	d.mux.Handle("GET /static/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !fs.ValidPath(strings.TrimPrefix(r.URL.Path, "/static/")) {
			http.NotFound(w, r) // the file server calls a name it cannot open a server error
			return
		}
		w.Header().Set("Cache-Control", "public, max-age=3600")
		files.ServeHTTP(w, r)
	}))
	d.mux.HandleFunc("GET /login", d.loginPage)
	d.mux.HandleFunc("POST /login", d.login)
	d.mux.Handle("POST /logout", d.change(d.logout))

	d.mux.Handle("GET /{$}", d.page(d.tasksPage))
	d.mux.Handle("GET /tasks/rows", d.page(d.taskRows))
	d.mux.Handle("GET /tasks/{id}", d.page(d.taskPage))
	d.mux.Handle("GET /tasks/{id}/live", d.page(d.taskLive))
	d.mux.Handle("GET /tasks/{id}/artifact", d.page(d.downloadArtifact))
	d.mux.Handle("GET /tasks/{id}/output", d.page(d.output))
	d.mux.Handle("POST /tasks/{id}/{action}", d.change(d.act))
	d.mux.Handle("GET /live", d.page(d.live))
	d.mux.Handle("GET /queue", d.page(d.queuePage))
	d.mux.Handle("GET /health", d.page(d.healthPage))
	d.mux.Handle("GET /money", d.page(d.moneyPage))
	d.mux.Handle("GET /schedules", d.page(d.schedulesPage))
	d.mux.Handle("POST /schedules/{id}/{action}", d.change(d.scheduleAct))
	d.mux.Handle("GET /memories", d.page(d.memoriesPage))
	d.mux.Handle("GET /memories/{id}", d.page(d.memoryPage))
	d.mux.Handle("POST /memories/{id}/{action}", d.change(d.memoryAct))
	d.mux.Handle("POST /agents/{name}/{action}", d.change(d.agentAct))
	d.mux.Handle("/", d.page(func(w http.ResponseWriter, r *http.Request, v *view) {
		d.fail(w, r, v, http.StatusNotFound, "No such page.")
	}))
}

// view is what every template gets: the session's CSRF token and the
// page's own data.
type view struct {
	CSRF  string
	Title string
	Now   time.Time
	Data  any
	// Fragment is set when a part of a page is rendered alone, for a
	// live refresh: it then brings the element it replaces.
	Fragment bool
}

type handler func(w http.ResponseWriter, r *http.Request, v *view)

// page requires a session; without one a browser is sent to log in.
func (d *Dashboard) page(h handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sess, ok := d.session(r)
		if !ok {
			if r.Header.Get("HX-Request") != "" {
				w.Header().Set("HX-Redirect", "/login")
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			http.Redirect(w, r, "/login", http.StatusSeeOther)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		h(w, r, &view{CSRF: d.sessions.csrf(sess), Now: d.cfg.Clock.Now()})
	})
}

// change is page for a request that changes state: it must come from
// this origin and carry the session's CSRF token.
func (d *Dashboard) change(h handler) http.Handler {
	return d.page(func(w http.ResponseWriter, r *http.Request, v *view) {
		if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
			d.fail(w, r, v, http.StatusForbidden, "Refused: the request did not come from this dashboard.")
			return
		}
		token := r.Header.Get("X-CSRF-Token")
		if token == "" {
			r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
			token = r.PostFormValue("csrf")
		}
		if subtle.ConstantTimeCompare([]byte(token), []byte(v.CSRF)) != 1 {
			d.fail(w, r, v, http.StatusForbidden, "Refused: the form was stale or not from this dashboard. Reload the page and try again.")
			return
		}
		h(w, r, v)
	})
}

func (d *Dashboard) session(r *http.Request) (session, bool) {
	c, err := r.Cookie(d.sessions.name)
	if err != nil {
		return session{}, false
	}
	return d.sessions.check(c.Value)
}

func (d *Dashboard) loginPage(w http.ResponseWriter, r *http.Request) {
	if _, ok := d.session(r); ok {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	d.render(w, r, http.StatusOK, "login", &view{Title: "Log in"})
}

func (d *Dashboard) login(w http.ResponseWriter, r *http.Request) {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		d.render(w, r, http.StatusForbidden, "login", &view{Title: "Log in", Data: "Refused: the login did not come from this dashboard."})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 1<<16)
	token := r.PostFormValue("token")
	if d.cfg.Token == "" || subtle.ConstantTimeCompare([]byte(token), []byte(d.cfg.Token)) != 1 {
		d.render(w, r, http.StatusUnauthorized, "login", &view{Title: "Log in", Data: "That is not the API token (see $ERRAND_HOME/token)."})
		return
	}
	sess, value := d.sessions.issue()
	http.SetCookie(w, &http.Cookie{
		Name: d.sessions.name, Value: value, Path: "/", Expires: sess.expires,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (d *Dashboard) logout(w http.ResponseWriter, r *http.Request, _ *view) {
	if sess, ok := d.session(r); ok {
		d.sessions.revoke(sess)
	}
	http.SetCookie(w, &http.Cookie{Name: d.sessions.name, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// render executes a page (or fragment) into a buffer first, so a template
// error is a clean 500 rather than half a page.
func (d *Dashboard) render(w http.ResponseWriter, r *http.Request, status int, name string, v *view) {
	t, ok := d.pages[name]
	if !ok {
		d.log.ErrorContext(r.Context(), "dashboard: no template", slog.String("name", name))
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, name, v); err != nil {
		d.log.ErrorContext(r.Context(), "dashboard: render", slog.String("page", name), slog.String("error", err.Error()))
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// fail renders an error page with a message written for people.
func (d *Dashboard) fail(w http.ResponseWriter, r *http.Request, v *view, status int, message string) {
	v.Title, v.Data = http.StatusText(status), message
	d.render(w, r, status, "error", v)
}
