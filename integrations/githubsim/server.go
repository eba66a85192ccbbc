package githubsim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/theloop-dev/theloop/internal/httpstatus"
)

// Config configures a Server. The zero value is usable: no token required,
// no hooks, github.com web URLs, the system clock.
type Config struct {
	// Token is the credential the REST API accepts ("Authorization: Bearer
	// <token>" or "token <token>"). Empty: any request is accepted, as the
	// token's user.
	Token string
	// BotLogin is the login of the token's user: the author of comments
	// posted and the sender of changes made through the REST API. Default
	// "theloop-bot".
	BotLogin string
	// Users are further credentials, token → login, for a human's own
	// client (the dashboard commenting as its operator): comments posted
	// with one are authored by that login. Other changes made with them
	// are attributed to BotLogin.
	Users map[string]string
	// Hooks receive a webhook for every change. More than one hook models a
	// repository hook and an app hook: the same change arrives once per
	// hook, each under its own delivery id.
	Hooks []Hook
	// WebURL is the browser root written into html_url fields. Default
	// "https://github.com".
	WebURL string
	// APIPrefix is the REST root's path: "" (github.com) or "/api/v3"
	// (GitHub Enterprise Server, whose GraphQL endpoint is /api/graphql).
	APIPrefix string
	// PageSize is the default per_page of lists (default 30, as GitHub).
	PageSize int
	// MaxPerPage caps per_page whatever a client asks (default 100, as
	// GitHub): a test lowers it to walk a client through several pages.
	MaxPerPage int
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// HTTPClient delivers webhooks. Default: a client with a 10 s timeout.
	HTTPClient *http.Client
	// OnRequest, when set, is called after each REST request is answered.
	// It runs on the request's goroutine and must not call back into the
	// server's mutating methods.
	OnRequest func(Request)
	// OnDelivery, when set, is called after each webhook delivery attempt,
	// on the delivery goroutine, in delivery order.
	OnDelivery func(Delivery)
	// Addr is the listen address. Default "127.0.0.1:0" (loopback only).
	Addr string
	// App, when set, serves a GitHub App (app.go): installation tokens
	// issued against the App's JWT authenticate requests as
	// "<slug>[bot]", which becomes BotLogin. Token, when also set, is
	// still accepted.
	App *AppConfig
}

// Hook is one webhook subscription.
type Hook struct {
	// URL receives the POSTs.
	URL string
	// Secret signs them ("" sends no signature headers, as GitHub does for
	// a hook without a secret).
	Secret string
	// ID is X-GitHub-Hook-ID (default: assigned).
	ID int64
	// Org makes it an organization's hook, listed at GET /orgs/{org}/hooks
	// instead of each repository's hooks ("": a repository hook, listed by
	// every repository). Either way it receives every event.
	Org string
	// App makes it the GitHub App's own webhook (Config.App): listed by no
	// repository or organization, its deliveries at GET /app/hook/
	// deliveries and redelivered at POST /app/hook/deliveries/{id}/attempts,
	// both with the App's JWT.
	App bool
}

// Request is one REST request the server answered.
type Request struct {
	Time   time.Time
	Method string
	// Path is relative to the REST root ("/repos/o/r/issues/1/comments").
	Path  string
	Query string
	// Body is the request body, clipped to 4 KiB.
	Body string
	// Authenticated reports whether the request carried the configured
	// token (true for every request when no token is configured). The token
	// itself is never recorded.
	Authenticated bool
	// User is the Config.Users login the request's token belongs to (""
	// for the configured token: the bot).
	User   string
	Status int
	// Faulted is set when an injected fault answered the request.
	Faulted bool
}

// Fault makes the server answer matching REST requests with Status instead
// of serving them (a 5xx storm, a rate limit, an outage).
type Fault struct {
	// Method matches the HTTP method ("" = any).
	Method string
	// PathContains matches a substring of the path relative to the REST
	// root ("" = any).
	PathContains string
	// Path matches the path relative to the REST root exactly ("" = any):
	// a list endpoint without the items under it.
	Path string
	// Status is the answer's status code (default 502).
	Status int
	// Header holds extra response headers (Retry-After, X-RateLimit-*).
	Header map[string]string
	// Body is the response body (default a GitHub-shaped message).
	Body string
	// Times bounds how many requests it answers (<= 0: until RemoveFaults).
	Times int
	// Slow holds the request, unanswered, until the client gives up (its
	// timeout or deadline): a GitHub that hangs.
	Slow bool
	// Every answers only every Every-th matching request (<= 1: each one),
	// the others being served normally: an intermittent outage.
	Every int
}

type fault struct {
	Fault
	used int // requests answered
	seen int // matching requests, answered or not (for Every)
}

// Server is a running GitHub stand-in. See the package documentation.
type Server struct {
	cfg      Config
	srv      *http.Server
	ln       net.Listener
	base     string // scheme://host
	table    []route
	hooks    []Hook
	outbound *outbox

	mu       sync.Mutex
	repos    map[string]*repo // lower-cased owner/name → repo
	nextID   int64
	requests []Request
	faults   []*fault
	closed   bool
	app      *appState // nil without Config.App
	az       *authzState
	// redeliveries counts POST .../deliveries/{id}/attempts answered 202.
	redeliveries int
}

const (
	defaultBot      = "theloop-bot"
	maxRequestBody  = 1 << 20
	recordedBodyCap = 4096
)

// Start listens on cfg.Addr (loopback by default) and serves until Close.
func Start(cfg Config) (*Server, error) {
	s, err := newServer(cfg)
	if err != nil {
		return nil, err
	}
	addr := cfg.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("githubsim: listening on %s: %w", addr, err)
	}
	s.ln = ln
	s.base = "http://" + ln.Addr().String()
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	s.outbound.start()
	return s, nil
}

// newServer builds a server without a listener (ServeHTTP works; no
// webhooks are sent until start).
func newServer(cfg Config) (*Server, error) {
	if cfg.App != nil {
		if cfg.App.PublicKey == nil || cfg.App.ID <= 0 || cfg.App.Slug == "" {
			return nil, errors.New("githubsim: Config.App needs an ID, a Slug and a PublicKey")
		}
		if cfg.BotLogin == "" {
			cfg.BotLogin = cfg.App.Slug + "[bot]"
		}
	}
	if cfg.BotLogin == "" {
		cfg.BotLogin = defaultBot
	}
	if err := checkLogin(cfg.BotLogin); err != nil {
		return nil, fmt.Errorf("githubsim: Config.BotLogin: %w", err)
	}
	if cfg.WebURL == "" {
		cfg.WebURL = "https://github.com"
	}
	cfg.WebURL = strings.TrimRight(cfg.WebURL, "/")
	switch cfg.APIPrefix {
	case "", "/api/v3":
	default:
		return nil, fmt.Errorf("githubsim: Config.APIPrefix must be \"\" or \"/api/v3\", not %q", cfg.APIPrefix)
	}
	if cfg.MaxPerPage <= 0 || cfg.MaxPerPage > 100 {
		cfg.MaxPerPage = 100
	}
	if cfg.PageSize <= 0 || cfg.PageSize > 100 {
		cfg.PageSize = 30
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	s := &Server{cfg: cfg, repos: map[string]*repo{}, nextID: 1000, base: "http://githubsim.invalid"}
	if cfg.App != nil {
		s.app = &appState{installs: map[int64]*Installation{}, tokens: map[string]*IssuedToken{}}
	}
	for i, h := range cfg.Hooks {
		if h.URL == "" {
			return nil, fmt.Errorf("githubsim: Config.Hooks[%d].URL is empty", i)
		}
		if h.ID == 0 {
			h.ID = int64(400000000 + i + 1)
		}
		s.hooks = append(s.hooks, h)
	}
	s.outbound = newOutbox(s)
	s.routes()
	return s, nil
}

// AddHook subscribes one more webhook receiver; changes made from now on
// are delivered to it too (a receiver that starts after the server, such
// as a daemon listening on a port it picked itself). It returns the hook's
// id.
func (s *Server) AddHook(h Hook) (int64, error) {
	if h.URL == "" {
		return 0, fmt.Errorf("%w: a hook needs a URL", ErrInvalid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if h.ID == 0 {
		h.ID = int64(400000000 + len(s.hooks) + 1)
	}
	s.hooks = append(s.hooks, h)
	return h.ID, nil
}

// URL is the REST root, for integrations.github.api.baseUrl.
func (s *Server) URL() string { return s.base + s.cfg.APIPrefix }

// BotLogin is the login of the token's user.
func (s *Server) BotLogin() string { return s.cfg.BotLogin }

// Close stops serving and stops the delivery goroutine; deliveries not yet
// made are dropped (and recorded as such). It is safe to call twice.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.mu.Unlock()
	if s.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = s.srv.Shutdown(ctx)
		cancel()
		_ = s.srv.Close()
	}
	s.outbound.close()
}

// Requests returns every REST request answered so far, oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// InjectFault adds a fault; faults are matched in the order added.
func (s *Server) InjectFault(f Fault) {
	if f.Status == 0 {
		f.Status = http.StatusBadGateway
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &fault{Fault: f})
}

// RemoveFaults removes every injected fault.
func (s *Server) RemoveFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

// ServeHTTP answers one REST request. It never panics: a handler failure
// is answered 500 and recorded.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sw := &httpstatus.Writer{ResponseWriter: w}
	rec := Request{Time: s.cfg.Now().UTC(), Method: r.Method, Query: r.URL.RawQuery}
	defer func() {
		if p := recover(); p != nil {
			if sw.Status == 0 {
				writeError(sw, http.StatusInternalServerError, "Server Error")
			}
		}
		rec.Status = sw.Status
		s.mu.Lock()
		s.requests = append(s.requests, rec)
		s.mu.Unlock()
		if s.cfg.OnRequest != nil {
			s.cfg.OnRequest(rec)
		}
	}()
	var body []byte
	if r.Body != nil {
		b, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBody+1))
		if err != nil {
			writeError(sw, http.StatusBadRequest, "Problems reading the request body")
			return
		}
		if len(b) > maxRequestBody {
			writeError(sw, http.StatusRequestEntityTooLarge, "Request body too large")
			return
		}
		body = b
	}
	rec.Body = clipBytes(body, recordedBodyCap)
	r.Body = io.NopCloser(bytes.NewReader(body))

	path := r.URL.EscapedPath()
	switch {
	case s.cfg.APIPrefix != "" && path == "/api/graphql":
		path = "/graphql"
	case s.cfg.APIPrefix != "":
		if path != s.cfg.APIPrefix && !strings.HasPrefix(path, s.cfg.APIPrefix+"/") {
			rec.Path = path
			writeError(sw, http.StatusNotFound, "Not Found")
			return
		}
		path = strings.TrimPrefix(path, s.cfg.APIPrefix)
		if path == "/graphql" { // GHES serves GraphQL at /api/graphql, not under the REST root
			rec.Path = s.cfg.APIPrefix + path
			writeError(sw, http.StatusNotFound, "Not Found")
			return
		}
	}
	rec.Path = path
	rec.Authenticated = s.authenticated(r.Header.Get("Authorization"))
	login := s.userLogin(r.Header.Get("Authorization"))
	rec.User = login

	if f := s.matchFault(r.Method, path); f != nil {
		rec.Faulted = true
		if f.Slow {
			<-r.Context().Done()
			return
		}
		for k, v := range f.Header {
			sw.Header().Set(k, v)
		}
		sw.Header().Set("Content-Type", "application/json; charset=utf-8")
		sw.WriteHeader(f.Status)
		b := f.Body
		if b == "" {
			b = fmt.Sprintf(`{"message":"%s"}`, http.StatusText(f.Status))
		}
		_, _ = io.WriteString(sw, b)
		return
	}
	if s.cfg.App != nil && appRoute(r.Method, path) {
		rec.Authenticated = true // by the JWT, checked by serveApp
		s.serveApp(sw, r, path)
		return
	}
	if !rec.Authenticated {
		writeError(sw, http.StatusUnauthorized, "Bad credentials")
		return
	}
	r2 := r.Clone(context.WithValue(r.Context(), userKey{}, login))
	if s.cfg.APIPrefix != "" {
		r2.URL.Path = strings.TrimPrefix(r2.URL.Path, s.cfg.APIPrefix)
		r2.URL.RawPath = strings.TrimPrefix(r2.URL.RawPath, s.cfg.APIPrefix)
	}
	r2.Body = io.NopCloser(bytes.NewReader(body))
	s.dispatch(sw, r2, path)
}

// userKey carries the request's login (Config.Users) to the handlers.
type userKey struct{}

// AddUser adds a Config.Users credential: comments posted with token are
// authored by login.
func (s *Server) AddUser(token, login string) error {
	if token == "" {
		return errors.New("githubsim: AddUser: empty token")
	}
	if err := checkLogin(login); err != nil {
		return fmt.Errorf("githubsim: AddUser: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	users := make(map[string]string, len(s.cfg.Users)+1)
	for t, l := range s.cfg.Users {
		users[t] = l
	}
	users[token] = login
	s.cfg.Users = users
	return nil
}

// userLogin is the login of a Config.Users token ("" otherwise).
func (s *Server) userLogin(auth string) string {
	_, tok, _ := strings.Cut(auth, " ")
	s.mu.Lock()
	users := s.cfg.Users
	s.mu.Unlock()
	for t, login := range users {
		if t != "" && constantTimeEqual(strings.TrimSpace(tok), t) {
			return login
		}
	}
	return ""
}

// author is who a comment posted by r is by.
func (s *Server) author(r *http.Request) string {
	if l, _ := r.Context().Value(userKey{}).(string); l != "" {
		return l
	}
	return s.cfg.BotLogin
}

func (s *Server) authenticated(auth string) bool {
	if s.userLogin(auth) != "" {
		return true
	}
	if s.cfg.Token == "" && s.cfg.App == nil {
		return true
	}
	scheme, tok, ok := strings.Cut(auth, " ")
	if !ok || !(strings.EqualFold(scheme, "Bearer") || strings.EqualFold(scheme, "token")) {
		return false
	}
	tok = strings.TrimSpace(tok)
	if s.cfg.App != nil {
		s.mu.Lock()
		live := s.appToken(tok)
		s.mu.Unlock()
		if live {
			return true
		}
	}
	return s.cfg.Token != "" && constantTimeEqual(tok, s.cfg.Token)
}

func (s *Server) matchFault(method, path string) *Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.faults {
		if (f.Method == "" || strings.EqualFold(f.Method, method)) && strings.Contains(path, f.PathContains) && (f.Path == "" || f.Path == path) && (f.Times <= 0 || f.used < f.Times) {
			f.seen++
			if f.Every > 1 && f.seen%f.Every != 0 {
				continue
			}
			f.used++
			c := f.Fault
			return &c
		}
	}
	return nil
}

func clipBytes(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

const docsURL = "https://docs.github.com/rest"

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "Server Error")
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]any{"message": msg, "documentation_url": docsURL, "status": fmt.Sprint(status)})
	_, _ = w.Write(b)
}

// lookupRepo finds a repository; s.mu must be held.
func (s *Server) lookupRepo(owner, name string) *repo {
	return s.repos[strings.ToLower(owner+"/"+name)]
}

func (rp *repo) full() string { return rp.owner + "/" + rp.name }

// newID hands out a fresh id; s.mu must be held.
func (s *Server) newID() int64 {
	s.nextID++
	return s.nextID
}

func (s *Server) now() time.Time { return s.cfg.Now().UTC().Truncate(time.Second) }
