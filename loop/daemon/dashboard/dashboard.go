package dashboard

import (
	"context"
	"crypto/rand"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/theloop-dev/theloop/loop/api/login"
)

//go:embed assets templates
var embedded embed.FS

// Config configures a Dashboard.
type Config struct {
	// Listen is the loopback host:port to serve on ("127.0.0.1:0" picks a
	// port). A non-loopback address is refused: the dashboard is a local
	// tool behind a login URL, never a public site.
	Listen string
	// StateRoot, when set, is where the login file (login.File) is written
	// for `loopctl dashboard`.
	StateRoot string
	// Operator is the GitHub login the gate buttons comment as (the
	// identity behind Deps.Poster).
	Operator string
	// AuthorizedUsers is routing.authorizedUsers: an Operator not on it is
	// offered no actions (ingress would drop the comment anyway).
	AuthorizedUsers []string
	// StuckAfter is the metrics page's default "stuck" threshold (default
	// 24h).
	StuckAfter time.Duration
	// Key is the login-token key (nil: 32 random bytes).
	Key []byte
	// EventLog, when set, is the shared JSONL event log the dashboard
	// watches for transitions made by other processes (an agent's
	// `loopctl graph complete`), polled every EventLogPoll (default 100ms).
	EventLog     string
	EventLogPoll time.Duration
	// Banner, when set, is shown on every page: something the operator must
	// know about the daemon (routing.sandbox: off — gates not defended).
	Banner string
	// WebTerminal is routing.webTerminal.mode: "off", "view" (the live
	// pane, read-only; "" means view) or "reply" (and the reply box for
	// an authorized operator). See pane.go.
	WebTerminal string
}

// Deps is the dashboard's world.
type Deps struct {
	// Source is the data (required).
	Source Source
	// Poster posts the operator's gate comments (nil: no actions).
	Poster Poster
	// Panes reads and answers the agents' panes (nil: no live pane).
	Panes Panes
	// MayAct answers whether a GitHub login may act on the work item ref
	// by loopd's rules (routing.authorizedUsers, then routing.authorized:
	// teams, roles, CODEOWNERS, answered by GitHub): "" yes, else why not.
	// nil: Config.AuthorizedUsers alone.
	MayAct func(ctx context.Context, login, ref string) string
	// Now is the clock (required: New refuses a nil one).
	Now func() time.Time
	// Log receives problems worth an operator's eye (default os.Stderr).
	Log io.Writer
	// Layout lays the graph pictures out (graphlayout.go); nil: the
	// built-in layout draws them.
	Layout Layouter
	// Settings lists the configuration loopd runs with, as `loopctl config
	// show` prints it, for the Settings page (settings.go; nil: none).
	Settings func() []Setting
	// SettingsNote is a line the Settings page shows above its rows (a
	// reload: when, and what waits for a restart); nil or "": none.
	SettingsNote func() string
	// Scrub removes known secrets from text the Settings page shows (nil:
	// the token shapes only).
	Scrub func(string) string
}

// Dashboard serves the board, the work-item pages, the metrics page and the
// live update stream. Build it with New; Start listens; Close stops the
// server and the update goroutine and removes the login file.
type Dashboard struct {
	cfg  Config
	deps Deps
	tpl  *template.Template
	auth *sessions
	hub  *hub
	tail *tailer
	// layouts caches the Graphviz layout of each graph shown.
	layouts *layoutCache

	mu   sync.Mutex
	srv  *http.Server
	ln   net.Listener
	base string
}

// New validates cfg and builds the dashboard (nothing listens yet). The
// update goroutine starts here; Close stops it.
func New(cfg Config, deps Deps) (*Dashboard, error) {
	if deps.Source == nil {
		return nil, errors.New("dashboard: Deps.Source is required")
	}
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	if err := checkLoopback(cfg.Listen); err != nil {
		return nil, err
	}
	if cfg.StuckAfter <= 0 {
		cfg.StuckAfter = 24 * time.Hour
	}
	if len(cfg.Key) == 0 {
		cfg.Key = make([]byte, 32)
		_, _ = rand.Read(cfg.Key)
	}
	if cfg.WebTerminal == "" {
		cfg.WebTerminal = WebTerminalView
	}
	if deps.Now == nil {
		return nil, errors.New("dashboard: no clock (Deps.Now)")
	}
	if deps.Log == nil {
		deps.Log = os.Stderr
	}
	tpl, err := parseTemplates(cfg.Banner)
	if err != nil {
		return nil, err
	}
	d := &Dashboard{cfg: cfg, deps: deps, tpl: tpl, auth: newSessions(cfg.Key), layouts: newLayoutCache(deps.Layout, deps.Now, deps.Log)}
	d.hub = newHub(deps.Source, deps.Now, deps.Log)
	if cfg.EventLog != "" {
		d.tail = startTailer(cfg.EventLog, cfg.EventLogPoll, d.hub.notify)
	}
	return d, nil
}

func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("dashboard: listen address %q: %v (want host:port on the loopback interface)", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("dashboard: listen address %q is not a loopback address; the dashboard serves 127.0.0.1 / [::1] only", addr)
	}
	return nil
}

// Start listens on Config.Listen, serves in the background and writes the
// login file under Config.StateRoot.
func (d *Dashboard) Start() error {
	ln, err := net.Listen("tcp", d.cfg.Listen)
	if err != nil {
		return fmt.Errorf("dashboard: listen on %s: %w", d.cfg.Listen, err)
	}
	srv := &http.Server{
		Handler:           d.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
	d.mu.Lock()
	d.srv, d.ln = srv, ln
	d.base = "http://" + ln.Addr().String()
	d.mu.Unlock()
	if d.cfg.StateRoot != "" {
		if err := login.WriteFile(d.cfg.StateRoot, d.base, d.cfg.Key); err != nil {
			_ = ln.Close()
			return fmt.Errorf("dashboard: login file: %w", err)
		}
	}
	go func() { _ = srv.Serve(ln) }()
	return nil
}

// URL is the dashboard's base URL (valid after Start).
func (d *Dashboard) URL() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.base
}

// LoginURL mints a one-time login URL (valid after Start).
func (d *Dashboard) LoginURL() string {
	return d.URL() + "/login?token=" + login.Mint(d.cfg.Key, d.deps.Now())
}

// Notify tells the dashboard that something about work item ref changed
// ("" when unknown): connected browsers get the changed rows. It never
// blocks.
func (d *Dashboard) Notify(ref string) { d.hub.notify(ref) }

// Close stops serving (open event streams are ended), stops the update
// goroutine and removes the login file.
func (d *Dashboard) Close() error {
	if d.tail != nil {
		d.tail.close()
		d.tail = nil
	}
	d.hub.close()
	d.mu.Lock()
	srv := d.srv
	d.mu.Unlock()
	if d.cfg.StateRoot != "" {
		login.RemoveFile(d.cfg.StateRoot, d.cfg.Key)
	}
	if srv == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		return srv.Close()
	}
	return nil
}

// operatorMay is "" when the configured operator may act on ref by loopd's
// rules, else why not.
func (d *Dashboard) operatorMay(ctx context.Context, ref string) string {
	if d.cfg.Operator == "" {
		return "no operator identity is configured"
	}
	if d.deps.MayAct != nil {
		return d.deps.MayAct(ctx, d.cfg.Operator, ref)
	}
	if slices.Contains(d.cfg.AuthorizedUsers, d.cfg.Operator) {
		return ""
	}
	return d.cfg.Operator + " is not in routing.authorizedUsers"
}

// Handler is the dashboard's HTTP handler (for tests and embedders that
// serve it themselves).
func (d *Dashboard) Handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(embedded, "assets")
	mux.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(static)))
	mux.HandleFunc("GET /login", d.login)
	mux.HandleFunc("GET /{$}", d.authed(d.board))
	mux.HandleFunc("GET /item", d.authed(d.item))
	mux.HandleFunc("POST /item/gate", d.authed(d.gate))
	mux.HandleFunc("GET /metrics", d.authed(d.metrics))
	mux.HandleFunc("GET /log", d.authed(d.eventLog))
	mux.HandleFunc("GET /settings", d.authed(d.settings))
	mux.HandleFunc("GET /events", d.authed(d.events))
	mux.HandleFunc("GET /item/pane", d.authed(d.pane))
	mux.HandleFunc("POST /item/reply", d.authed(d.reply))
	mux.HandleFunc("GET /term.css", termStyles)
	return d.guard(mux)
}

// guard sets the security headers on every response and refuses requests
// whose Host is not the loopback (DNS rebinding) and unsafe requests from
// another origin.
func (d *Dashboard) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin") // never to other sites; "no-referrer" would make the browser send Origin: null on our own forms
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		if !loopbackHost(r.Host) {
			http.Error(w, "dashboard: this server answers only to a loopback host name (127.0.0.1, [::1], localhost)", http.StatusMisdirectedRequest)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if why := sameOrigin(r); why != "" {
				http.Error(w, "dashboard: "+why, http.StatusForbidden)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// sameOrigin says why an unsafe request is not a same-origin browser
// request ("" when it is). A cookie and a CSRF token are not enough: both
// are bearer secrets a program that got hold of a login URL can replay,
// while a browser marks its own requests. So the request must carry
// Sec-Fetch-Site: same-origin, or an Origin equal to the dashboard's own
// (http://<Host>, the Host already checked to be loopback); a foreign
// value of either is refused, and so is a request with neither (curl, a
// script) — every browser the dashboard supports sends Origin on a POST.
func sameOrigin(r *http.Request) string {
	site, origin := r.Header.Get("Sec-Fetch-Site"), r.Header.Get("Origin")
	if site != "" && site != "same-origin" {
		return "cross-site request refused (Sec-Fetch-Site: " + site + ")"
	}
	if origin != "" && origin != "http://"+r.Host {
		return "cross-origin request refused"
	}
	if site == "" && origin == "" {
		return "a state-changing request must come from the dashboard's own page in a browser (no Origin or Sec-Fetch-Site header)"
	}
	return ""
}

func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// authed requires a session cookie.
func (d *Dashboard) authed(h func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, err := r.Cookie(cookieName)
		var ss *session
		ok := false
		if err == nil {
			ss, ok = d.auth.lookup(c.Value, d.deps.Now())
		}
		if !ok {
			w.WriteHeader(http.StatusUnauthorized)
			d.render(w, "denied.html", map[string]any{"Title": "Log in", "Why": "This dashboard needs a login: run `loopctl dashboard` and open the URL it prints."})
			return
		}
		h(w, r, ss)
	}
}

// login redeems a one-time token into a session cookie.
func (d *Dashboard) login(w http.ResponseWriter, r *http.Request) {
	id, err := d.auth.redeem(r.URL.Query().Get("token"), d.deps.Now())
	if err != nil {
		w.WriteHeader(http.StatusForbidden)
		d.render(w, "denied.html", map[string]any{"Title": "Log in", "Why": "This login URL is invalid, expired or was already used. Run `loopctl dashboard` for a new one."})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: id, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, MaxAge: int(SessionTTL / time.Second)})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (d *Dashboard) render(w http.ResponseWriter, name string, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := d.tpl.ExecuteTemplate(w, name, data); err != nil {
		fmt.Fprintf(d.deps.Log, "dashboard: rendering %s: %v\n", name, err)
	}
}
