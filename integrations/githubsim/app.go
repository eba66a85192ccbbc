package githubsim

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// A GitHub App's world, as GitHub runs it: the App signs a JWT (RS256)
// with its private key; GitHub verifies it with the App's public key and
// trades it for an installation access token (POST
// /app/installations/{id}/access_tokens), valid an hour, which then
// authenticates REST requests as the App's bot, "<slug>[bot]". A
// suspended installation is refused 403 with GitHub's message; a removed
// one 404; a JWT that does not verify 401.

// AppConfig makes a Server a GitHub App's world (Config.App).
type AppConfig struct {
	// ID is the App's id: the JWT's "iss".
	ID int64
	// Slug is the App's URL name; its bot "<slug>[bot]" authors what the
	// installation tokens post.
	Slug string
	// PublicKey verifies the App's JWTs.
	PublicKey *rsa.PublicKey
	// TokenLifetime is an installation token's validity (default one
	// hour, as GitHub).
	TokenLifetime time.Duration
}

// Installation is one installation of the App.
type Installation struct {
	ID int64
	// Repos are the owner/name repositories it covers.
	Repos     []string
	Suspended bool
	Removed   bool
}

// IssuedToken is one installation token the server handed out.
type IssuedToken struct {
	Installation int64
	IssuedAt     time.Time
	ExpiresAt    time.Time
}

type appState struct {
	installs map[int64]*Installation
	tokens   map[string]*IssuedToken
	issued   []IssuedToken
}

// GitHub's words, as its API answers them.
const (
	msgSuspended  = "This installation has been suspended"
	msgBadJWT     = "A JSON web token could not be decoded"
	msgExpiredJWT = "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires"
	msgJWTNeeded  = "A JSON web token is required to access this endpoint"
)

// AddInstallation installs the App on repos and returns the
// installation's id.
func (s *Server) AddInstallation(repos ...string) (int64, error) {
	if s.cfg.App == nil {
		return 0, fmt.Errorf("%w: the server has no Config.App", ErrInvalid)
	}
	for _, r := range repos {
		if _, _, err := splitRepo(r); err != nil {
			return 0, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.newID()
	s.app.installs[id] = &Installation{ID: id, Repos: append([]string(nil), repos...)}
	return id, nil
}

// SuspendInstallation suspends (revokes) installation id: its tokens stop
// working and no new one is issued (403, GitHub's message).
func (s *Server) SuspendInstallation(id int64) error {
	return s.changeInstallation(id, func(in *Installation) { in.Suspended = true })
}

// RemoveInstallation uninstalls the App from the installation's
// repositories (404 from then on).
func (s *Server) RemoveInstallation(id int64) error {
	return s.changeInstallation(id, func(in *Installation) { in.Removed = true })
}

// RevokeInstallationTokens invalidates every token issued so far for id
// (DELETE /installation/token, a key rotation): the next request with one
// is 401 and the App must exchange a new JWT.
func (s *Server) RevokeInstallationTokens(id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.app == nil {
		return
	}
	for tok, it := range s.app.tokens {
		if it.Installation == id {
			delete(s.app.tokens, tok)
		}
	}
}

func (s *Server) changeInstallation(id int64, f func(*Installation)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.app == nil || s.app.installs[id] == nil {
		return fmt.Errorf("%w: installation %d", ErrNotFound, id)
	}
	f(s.app.installs[id])
	return nil
}

// IssuedTokens lists the installation tokens handed out, oldest first.
func (s *Server) IssuedTokens() []IssuedToken {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.app == nil {
		return nil
	}
	return append([]IssuedToken(nil), s.app.issued...)
}

// appToken reports whether tok is a live installation token; s.mu held.
func (s *Server) appToken(tok string) bool {
	if s.app == nil {
		return false
	}
	it := s.app.tokens[tok]
	if it == nil || !s.cfg.Now().Before(it.ExpiresAt) {
		return false
	}
	in := s.app.installs[it.Installation]
	return in != nil && !in.Suspended && !in.Removed
}

// appRoute reports whether path is one the App authenticates with its
// JWT.
func appRoute(method, path string) bool {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case method == http.MethodGet && len(segs) == 1 && segs[0] == "app":
		return true
	case method == http.MethodPost && len(segs) == 4 && segs[0] == "app" && segs[1] == "installations" && segs[3] == "access_tokens":
		return true
	case method == http.MethodGet && len(segs) == 4 && segs[0] == "repos" && segs[3] == "installation":
		return true
	case len(segs) >= 3 && segs[0] == "app" && segs[1] == "hook" && segs[2] == "deliveries":
		// The App's webhook deliveries (hookdeliveries.go).
		return (method == http.MethodGet && len(segs) == 3) || (method == http.MethodPost && len(segs) == 5 && segs[4] == "attempts")
	}
	return false
}

// serveApp answers the App's JWT-authenticated endpoints.
func (s *Server) serveApp(w http.ResponseWriter, r *http.Request, path string) {
	scheme, tok, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "Bearer") || strings.Count(tok, ".") != 2 {
		writeError(w, http.StatusUnauthorized, msgJWTNeeded)
		return
	}
	app := s.cfg.App
	claims := &jwt.RegisteredClaims{}
	_, err := jwt.ParseWithClaims(strings.TrimSpace(tok), claims, func(*jwt.Token) (any, error) { return app.PublicKey, nil },
		jwt.WithValidMethods([]string{"RS256"}), jwt.WithTimeFunc(s.cfg.Now), jwt.WithIssuedAt(), jwt.WithExpirationRequired())
	switch {
	case err != nil && strings.Contains(err.Error(), "expired"):
		writeError(w, http.StatusUnauthorized, msgExpiredJWT)
		return
	case err != nil:
		writeError(w, http.StatusUnauthorized, msgBadJWT)
		return
	case claims.Issuer != strconv.FormatInt(app.ID, 10):
		writeError(w, http.StatusUnauthorized, "Integration not found")
		return
	case claims.ExpiresAt.Sub(claims.IssuedAt.Time) > 10*time.Minute:
		writeError(w, http.StatusUnauthorized, msgExpiredJWT)
		return
	}
	segs := strings.Split(strings.Trim(path, "/"), "/")
	s.mu.Lock()
	defer s.mu.Unlock()
	all := func(Delivery) bool { return true }
	switch {
	case len(segs) == 3 && segs[1] == "hook":
		if hook := s.appHookID(w); hook != 0 {
			s.listDeliveriesOf(w, r, hook, all)
		}
	case len(segs) == 5 && segs[1] == "hook":
		if hook := s.appHookID(w); hook != 0 {
			s.redeliverAttemptOf(w, segs[3], hook, all)
		}
	case len(segs) == 1:
		writeJSON(w, http.StatusOK, map[string]any{"id": app.ID, "slug": app.Slug, "name": app.Slug,
			"owner": s.userJSON(app.Slug), "html_url": s.cfg.WebURL + "/apps/" + app.Slug,
			"permissions": map[string]any{}, "events": []any{}, "created_at": ts(s.now()), "updated_at": ts(s.now()),
			"node_id": nodeID("03:Integration", app.ID), "description": nil, "external_url": s.cfg.WebURL})
	case segs[0] == "repos":
		full := strings.ToLower(segs[1] + "/" + segs[2])
		for _, in := range s.app.installs {
			if in.Removed {
				continue
			}
			for _, rp := range in.Repos {
				if strings.ToLower(rp) == full {
					writeJSON(w, http.StatusOK, s.installationJSON(in))
					return
				}
			}
		}
		notFound(w)
	default:
		id, err := strconv.ParseInt(segs[2], 10, 64)
		in := s.app.installs[id]
		if err != nil || in == nil || in.Removed {
			notFound(w)
			return
		}
		if in.Suspended {
			writeError(w, http.StatusForbidden, msgSuspended)
			return
		}
		lifetime := app.TokenLifetime
		if lifetime <= 0 {
			lifetime = time.Hour
		}
		b := make([]byte, 18)
		_, _ = rand.Read(b)
		token := "ghs_" + hex.EncodeToString(b)
		now := s.now()
		it := &IssuedToken{Installation: id, IssuedAt: now, ExpiresAt: now.Add(lifetime)}
		s.app.tokens[token] = it
		s.app.issued = append(s.app.issued, *it)
		writeJSON(w, http.StatusCreated, map[string]any{
			"token": token, "expires_at": ts(it.ExpiresAt),
			"permissions":          map[string]any{"issues": "write", "pull_requests": "write", "checks": "read", "metadata": "read"},
			"repository_selection": "selected",
		})
	}
}

func (s *Server) installationJSON(in *Installation) map[string]any {
	app := s.cfg.App
	return map[string]any{
		"id": in.ID, "app_id": app.ID, "app_slug": app.Slug, "target_type": "Organization", "target_id": userID(app.Slug),
		"account":              s.userJSON(strings.SplitN(in.Repos[0], "/", 2)[0]),
		"access_tokens_url":    fmt.Sprintf("%s/app/installations/%d/access_tokens", s.apiURL(), in.ID),
		"repositories_url":     s.apiURL() + "/installation/repositories",
		"html_url":             fmt.Sprintf("%s/settings/installations/%d", s.cfg.WebURL, in.ID),
		"repository_selection": "selected", "permissions": map[string]any{"issues": "write", "pull_requests": "write", "checks": "read", "metadata": "read"},
		"events": []any{}, "created_at": ts(s.now()), "updated_at": ts(s.now()), "single_file_name": nil,
		"suspended_by": nil, "suspended_at": nil,
	}
}
