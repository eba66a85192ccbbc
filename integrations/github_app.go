package integrations

import (
	"context"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/theloop-dev/theloop/graph"
)

// GitHub App authentication (docs/decisions.md §25).
//
// An App proves itself with a JSON Web Token signed (RS256) by its private
// key, and trades that JWT for an installation access token per
// installation (POST /app/installations/{id}/access_tokens); the
// installation token, valid one hour, authenticates every other request.
// Tokens are cached per installation and renewed renewBefore ahead of their
// expiry, on the Set's clock, so a fake clock drives renewal in tests.
//
// Why not github.com/bradleyfalzon/ghinstallation/v2: it reads time.Now
// for both the JWT's claims and its token expiry, with no way to inject a
// clock (docs/conventions §20: one clock per world), and pulls go-github
// in for its types. The part it would do for us is the RS256 signature,
// which github.com/golang-jwt/jwt/v5 (ghinstallation's own JWT library, no
// dependencies) does; the exchange and the cache are the few lines below,
// and they go through the api transport's own client, retry policy and
// request bound.

// DefaultGitHubAppKeyEnv is the variable holding the App's private key
// (PEM) when integrations.github.app names neither privateKeyFile nor
// privateKeyEnv.
const DefaultGitHubAppKeyEnv = "THE_LOOP_GH_APP_PRIVATE_KEY"

const (
	// renewBefore: an installation token is renewed this long before it
	// expires, so no request carries a token that expires in flight.
	renewBefore = 5 * time.Minute
	// jwtLifetime: GitHub refuses an App JWT valid longer than 10 minutes.
	jwtLifetime = 9 * time.Minute
	// jwtBackdate absorbs a clock running ahead of GitHub's (GitHub's own
	// advice: issued-at 60 s in the past).
	jwtBackdate = 60 * time.Second
	// installationTTL bounds how long a repository's installation id is
	// believed (an App reinstalled gets a new id).
	installationTTL = time.Hour
	// maxKeyBytes bounds a private-key file read.
	maxKeyBytes = 64 << 10
)

// GitHubAppConfig is integrations.github.app: loopd authenticates as a
// GitHub App instead of with a personal token. The private key never
// appears in configuration: it is read from PrivateKeyFile or from the
// variable PrivateKeyEnv names.
type GitHubAppConfig struct {
	// AppID is the App's numeric id (its settings page, "App ID").
	AppID int64 `yaml:"appId,omitempty" json:"appId,omitempty"`
	// Slug is the App's URL name; its bot's login, "<slug>[bot]", is the
	// author of everything loopd posts and counts as loopd itself.
	Slug string `yaml:"slug,omitempty" json:"slug,omitempty"`
	// PrivateKeyFile is a path to the App's private key (PEM).
	PrivateKeyFile string `yaml:"privateKeyFile,omitempty" json:"privateKeyFile,omitempty"`
	// PrivateKeyEnv names a variable holding the key (PEM). Default
	// THE_LOOP_GH_APP_PRIVATE_KEY when PrivateKeyFile is not set.
	PrivateKeyEnv string `yaml:"privateKeyEnv,omitempty" json:"privateKeyEnv,omitempty"`
	// InstallationID, when set, is the one installation used for every
	// repository; 0 finds each served repository's installation with
	// GET /repos/{owner}/{repo}/installation.
	InstallationID int64 `yaml:"installationId,omitempty" json:"installationId,omitempty"`
}

// BotLogin is the login of the App's bot user, "<slug>[bot]".
func (c GitHubAppConfig) BotLogin() string { return c.Slug + "[bot]" }

func (c GitHubAppConfig) keyEnv() string {
	if c.PrivateKeyEnv != "" || c.PrivateKeyFile != "" {
		return c.PrivateKeyEnv
	}
	return DefaultGitHubAppKeyEnv
}

func (c GitHubAppConfig) validate(bad func(key, format string, args ...any)) {
	if c.AppID <= 0 {
		bad("github.app.appId", "is required: the App's numeric id (its settings page, \"App ID\")")
	}
	if !validSlug(c.Slug) {
		bad("github.app.slug", "%q is not an App slug: give the App's URL name (github.com/apps/<slug>); its bot <slug>[bot] counts as loopd itself", clip(c.Slug, 60))
	}
	if c.PrivateKeyFile != "" && c.PrivateKeyEnv != "" {
		bad("github.app.privateKeyFile", "set privateKeyFile or privateKeyEnv, not both")
	}
	if c.PrivateKeyEnv != "" && !validEnvName(c.PrivateKeyEnv) {
		bad("github.app.privateKeyEnv", "%q is not an environment-variable name", c.PrivateKeyEnv)
	}
	if c.InstallationID < 0 {
		bad("github.app.installationId", "must not be negative (0 = found per repository)")
	}
}

func validSlug(s string) bool {
	if s == "" || len(s) > 100 || s[0] == '-' {
		return false
	}
	for _, r := range s {
		if !(r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// githubCredential authenticates the api transport's requests.
type githubCredential interface {
	// authorization is the Authorization header value for req.
	authorization(ctx context.Context, req ghRequest) (string, error)
	// rejected is told that GitHub answered 401 to a request sent with
	// header: a cached credential is dropped, and it reports whether a
	// fresh one may be worth a second try.
	rejected(req ghRequest, header string) bool
	// hint says how to fix rejected credentials.
	hint() string
}

// tokenCredential is a personal or other static token.
type tokenCredential struct{ s *secret }

func (t tokenCredential) authorization(ctx context.Context, _ ghRequest) (string, error) {
	tok, err := t.s.get(ctx)
	if err != nil {
		return "", err
	}
	return "Bearer " + tok, nil
}

func (tokenCredential) rejected(ghRequest, string) bool { return false }

func (t tokenCredential) hint() string {
	return "check the token in " + envList(t.s.env) + " (integrations.github.api.tokenEnv)"
}

// appCredential is a GitHub App: JWTs for the App's own endpoints
// (app/...), installation tokens for everything else.
type appCredential struct {
	cfg    GitHubAppConfig
	client *http.Client
	base   *url.URL
	clock  graph.Clock
	lookup Env
	red    *redactor

	mu     sync.Mutex
	key    *rsa.PrivateKey
	tokens map[int64]*installationToken
	repos  map[string]repoInstallation // lower-cased owner/repo
	// flights serialises the exchange per installation, so a burst of
	// requests with an expired token makes one exchange, not one each.
	flights map[int64]*sync.Mutex
}

type installationToken struct {
	token   string
	expires time.Time
}

type repoInstallation struct {
	id   int64
	seen time.Time
}

func newAppCredential(cfg GitHubAppConfig, client *http.Client, base *url.URL, clock graph.Clock, lookup Env, red *redactor) *appCredential {
	return &appCredential{cfg: cfg, client: client, base: base, clock: clock, lookup: lookup, red: red,
		tokens: map[int64]*installationToken{}, repos: map[string]repoInstallation{}, flights: map[int64]*sync.Mutex{}}
}

// keyPresent reports whether the private key can be looked for without
// reading anything: its variable is set, or a file is named.
func (a *appCredential) keyPresent() bool {
	if a.cfg.PrivateKeyFile != "" {
		return true
	}
	v, ok := a.lookup(a.cfg.keyEnv())
	return ok && strings.TrimSpace(v) != ""
}

func (a *appCredential) keyWhere() string {
	if a.cfg.PrivateKeyFile != "" {
		return "integrations.github.app.privateKeyFile (" + a.cfg.PrivateKeyFile + ")"
	}
	return a.cfg.keyEnv()
}

// privateKey reads and parses the key once.
func (a *appCredential) privateKey() (*rsa.PrivateKey, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.key != nil {
		return a.key, nil
	}
	var pem []byte
	if a.cfg.PrivateKeyFile != "" {
		f, err := os.Open(a.cfg.PrivateKeyFile)
		if err != nil {
			return nil, failFinal(ErrNoCredentials, "the GitHub App's private key cannot be read from %s (%v) — download a key on the App's settings page and point integrations.github.app.privateKeyFile at it", a.cfg.PrivateKeyFile, errors.Unwrap(err))
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, maxKeyBytes+1))
		if err != nil || len(b) > maxKeyBytes {
			return nil, failFinal(ErrNoCredentials, "the GitHub App's private key file %s is unreadable or larger than %d bytes", a.cfg.PrivateKeyFile, maxKeyBytes)
		}
		pem = b
	} else {
		v, ok := a.lookup(a.cfg.keyEnv())
		if !ok || strings.TrimSpace(v) == "" {
			return nil, failFinal(ErrNoCredentials, "no GitHub App private key: %s is not set — export the App's private key (PEM) there, or set integrations.github.app.privateKeyFile", a.cfg.keyEnv())
		}
		pem = []byte(v)
	}
	a.red.add(strings.TrimSpace(string(pem)))
	key, err := jwt.ParseRSAPrivateKeyFromPEM(pem)
	if err != nil {
		// Never quote the key, nor the parser's words about it.
		return nil, failFinal(ErrNoCredentials, "the GitHub App's private key in %s is not an RSA private key in PEM form — use the .pem file GitHub generated for the App", a.keyWhere())
	}
	a.key = key
	return key, nil
}

// JWT signs a fresh App JWT on the credential's clock.
func (a *appCredential) jwt() (string, error) {
	key, err := a.privateKey()
	if err != nil {
		return "", err
	}
	now := a.clock.Now()
	claims := jwt.RegisteredClaims{
		Issuer:    strconv.FormatInt(a.cfg.AppID, 10),
		IssuedAt:  jwt.NewNumericDate(now.Add(-jwtBackdate)),
		ExpiresAt: jwt.NewNumericDate(now.Add(jwtLifetime)),
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodRS256, claims).SignedString(key)
	if err != nil {
		return "", failFinal(ErrNoCredentials, "signing the GitHub App's JWT failed")
	}
	a.red.add(s)
	return s, nil
}

func (a *appCredential) authorization(ctx context.Context, req ghRequest) (string, error) {
	if appEndpoint(req.path) {
		j, err := a.jwt()
		if err != nil {
			return "", err
		}
		return "Bearer " + j, nil
	}
	id, err := a.installation(ctx, req)
	if err != nil {
		return "", err
	}
	tok, err := a.token(ctx, id)
	if err != nil {
		return "", err
	}
	return "token " + tok, nil
}

// appEndpoint reports whether path is one of the App's own endpoints,
// which GitHub authenticates with the JWT (app/hook/deliveries, …).
func appEndpoint(path string) bool { return path == "app" || strings.HasPrefix(path, "app/") }

// requestRepo is the owner/repo a request is about: its path's
// repos/{owner}/{repo}, else the repo the request names itself (graphql).
func requestRepo(req ghRequest) string {
	if rest, ok := strings.CutPrefix(req.path, "repos/"); ok {
		parts := strings.SplitN(rest, "/", 3)
		if len(parts) >= 2 {
			if i := strings.IndexAny(parts[1], "?#"); i >= 0 {
				parts[1] = parts[1][:i]
			}
			return strings.ToLower(parts[0] + "/" + parts[1])
		}
	}
	return strings.ToLower(req.repo)
}

// installation is the installation serving req's repository.
func (a *appCredential) installation(ctx context.Context, req ghRequest) (int64, error) {
	if a.cfg.InstallationID > 0 {
		return a.cfg.InstallationID, nil
	}
	repo := requestRepo(req)
	if repo == "" {
		return 0, failFinal(ErrNoCredentials, "the GitHub App cannot tell which installation serves %s (it names no repository) — set integrations.github.app.installationId", clip(req.path, 80))
	}
	now := a.clock.Now()
	a.mu.Lock()
	ri, ok := a.repos[repo]
	a.mu.Unlock()
	if ok && now.Sub(ri.seen) < installationTTL {
		return ri.id, nil
	}
	j, err := a.jwt()
	if err != nil {
		return 0, err
	}
	resp, err := a.exchange(ctx, http.MethodGet, "repos/"+repo+"/installation", j)
	if err != nil {
		return 0, err
	}
	switch {
	case resp.status == http.StatusNotFound:
		return 0, failFinal(ErrAppInstallation, "the GitHub App %s is not installed on %s (GitHub answered 404 to GET /repos/%s/installation) — install it on the repository (github.com/apps/%s/installations/new)", a.cfg.Slug, repo, repo, a.cfg.Slug)
	case resp.status/100 != 2:
		return 0, a.refused(resp, "finding the installation of "+repo)
	}
	var body struct {
		ID int64 `json:"id"`
	}
	if json.Unmarshal(resp.body, &body) != nil || body.ID <= 0 {
		return 0, fail(ErrTransport, "GitHub's answer to GET /repos/%s/installation names no installation id", repo)
	}
	a.mu.Lock()
	a.repos[repo] = repoInstallation{id: body.ID, seen: now}
	a.mu.Unlock()
	return body.ID, nil
}

// token returns a valid installation token for id, exchanging a JWT for a
// new one when the cached one expires within renewBefore.
func (a *appCredential) token(ctx context.Context, id int64) (string, error) {
	a.mu.Lock()
	fl := a.flights[id]
	if fl == nil {
		fl = &sync.Mutex{}
		a.flights[id] = fl
	}
	a.mu.Unlock()
	fl.Lock()
	defer fl.Unlock()
	a.mu.Lock()
	cur := a.tokens[id]
	a.mu.Unlock()
	if cur != nil && a.clock.Now().Add(renewBefore).Before(cur.expires) {
		return cur.token, nil
	}
	j, err := a.jwt()
	if err != nil {
		return "", err
	}
	resp, err := a.exchange(ctx, http.MethodPost, fmt.Sprintf("app/installations/%d/access_tokens", id), j)
	if err != nil {
		return "", err
	}
	if resp.status/100 != 2 {
		a.forgetInstallation(id)
		return "", a.refused(resp, fmt.Sprintf("an access token for installation %d", id))
	}
	var body struct {
		Token     string    `json:"token"`
		ExpiresAt time.Time `json:"expires_at"`
	}
	if json.Unmarshal(resp.body, &body) != nil || body.Token == "" || body.ExpiresAt.IsZero() {
		return "", fail(ErrTransport, "GitHub's answer to POST /app/installations/%d/access_tokens holds no token and expiry", id)
	}
	a.red.add(body.Token)
	a.mu.Lock()
	a.tokens[id] = &installationToken{token: body.Token, expires: body.ExpiresAt}
	a.mu.Unlock()
	return body.Token, nil
}

// forgetInstallation drops what is cached about installation id (its
// token, the repositories it was found for).
func (a *appCredential) forgetInstallation(id int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.tokens, id)
	for r, ri := range a.repos {
		if ri.id == id {
			delete(a.repos, r)
		}
	}
}

// refused describes GitHub refusing the App's JWT or installation.
func (a *appCredential) refused(resp response, what string) error {
	detail := fmt.Sprintf("HTTP %d", resp.status)
	if m := githubMessage(resp.body); m != "" {
		detail += ": " + m
	}
	switch resp.status {
	case http.StatusUnauthorized:
		return failFinal(ErrUnauthorized, "GitHub refused the App's JWT for %s (%s) — check integrations.github.app.appId (%d) and that the private key in %s is the App's current one", what, detail, a.cfg.AppID, a.keyWhere())
	case http.StatusForbidden, http.StatusNotFound, http.StatusGone:
		f := failFinal(ErrAppInstallation, "GitHub refused %s (%s): the App's installation is suspended, revoked or removed — reinstall the App %s on the repository or unsuspend it in the organisation's settings", what, detail, a.cfg.Slug)
		f.status = resp.status
		return f
	}
	f := fail(ErrRejected, "GitHub refused %s (%s)", what, detail)
	if resp.status >= 500 {
		f.kinds = []error{ErrServer}
	}
	f.status = resp.status
	return f
}

// exchange makes one request of the App's authentication with the JWT.
func (a *appCredential) exchange(ctx context.Context, method, path, jwtToken string) (response, error) {
	h := http.Header{}
	h.Set("Authorization", "Bearer "+jwtToken)
	h.Set("Accept", "application/vnd.github+json")
	h.Set("X-GitHub-Api-Version", "2022-11-28")
	h.Set("User-Agent", "theloop")
	return httpAttempt(a.client, method, a.base.String()+"/"+path, h, nil)(ctx)
}

func (a *appCredential) rejected(req ghRequest, header string) bool {
	if appEndpoint(req.path) {
		return false
	}
	tok := strings.TrimPrefix(header, "token ")
	a.mu.Lock()
	defer a.mu.Unlock()
	for id, t := range a.tokens {
		if t.token == tok {
			// Revoked early (DELETE /installation/token, a key rotation):
			// a fresh exchange may cure it once.
			delete(a.tokens, id)
			return true
		}
	}
	return false
}

func (a *appCredential) hint() string {
	return fmt.Sprintf("the GitHub App %s (integrations.github.app, key in %s) was refused: check that it is installed on the repository and not suspended", a.cfg.Slug, a.keyWhere())
}
