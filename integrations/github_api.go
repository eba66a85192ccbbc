package integrations

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/theloop-dev/theloop/workitem"
)

// githubAPI is the api transport: net/http against the REST root (and its
// GraphQL endpoint) with a bearer token. It serves exactly one host, the
// one its base URL names; a ref naming another host is refused rather than
// sent to the wrong server.
type githubAPI struct {
	client  *http.Client
	base    *url.URL
	graphql string
	host    string // browser host of the issues this API serves
	cred    githubCredential
	// slots bounds the requests in flight (maxGitHubRequests).
	slots chan struct{}
}

// maxGitHubRequests bounds the requests one API transport has in flight.
// GitHub's secondary rate limit asks for no more than 100 concurrent
// requests per token; every caller (the intake's reactions and effects,
// the poller, the dashboard's titles, the outbox) shares this bound, so no
// one of them can set it off by fanning out.
const maxGitHubRequests = 32

func newGitHubAPI(client *http.Client, base *url.URL, cred githubCredential) *githubAPI {
	a := &githubAPI{client: client, base: base, cred: cred, host: strings.ToLower(base.Host), slots: make(chan struct{}, maxGitHubRequests)}
	if strings.EqualFold(base.Host, "api.github.com") {
		a.host = workitem.DefaultGitHubHost
	}
	g := *base
	if strings.HasSuffix(g.Path, "/api/v3") {
		g.Path = strings.TrimSuffix(g.Path, "/api/v3") + "/api/graphql"
	} else {
		g.Path += "/graphql"
	}
	a.graphql = g.String()
	return a
}

func (a *githubAPI) name() string { return TransportAPI }

func (a *githubAPI) do(ctx context.Context, req ghRequest) (response, error) {
	resp, auth, err := a.once(ctx, req)
	if err == nil && resp.status == http.StatusUnauthorized && a.cred.rejected(req, auth) {
		// A cached installation token revoked before its expiry: one
		// fresh exchange, then GitHub's answer stands.
		resp, _, err = a.once(ctx, req)
	}
	return resp, err
}

func (a *githubAPI) once(ctx context.Context, req ghRequest) (response, string, error) {
	auth, err := a.cred.authorization(ctx, req)
	if err != nil {
		return response{}, "", err
	}
	target := a.base.String() + "/" + req.path
	if req.path == "graphql" {
		target = a.graphql
	}
	h := http.Header{}
	h.Set("Authorization", auth)
	h.Set("Accept", "application/vnd.github+json")
	h.Set("X-GitHub-Api-Version", "2022-11-28")
	h.Set("User-Agent", "theloop")
	if req.body != nil {
		h.Set("Content-Type", "application/json")
	}
	select {
	case a.slots <- struct{}{}:
	case <-ctx.Done():
		return response{}, auth, ctx.Err()
	}
	defer func() { <-a.slots }()
	resp, err := httpAttempt(a.client, req.method, target, h, req.body)(ctx)
	return resp, auth, err
}

func (a *githubAPI) nextPath(link string) (string, error) {
	u, err := url.Parse(link)
	if err != nil || !strings.EqualFold(u.Scheme, a.base.Scheme) || !strings.EqualFold(u.Host, a.base.Host) {
		// The token must never follow a link to another server.
		return "", fail(ErrTransport, "GitHub's next-page link points outside %s; refusing to follow it", a.base.Host)
	}
	return relativeAPIPath(u, a.base.EscapedPath())
}

func (a *githubAPI) checkHost(host string) error {
	if host == "" || strings.EqualFold(host, a.host) {
		return nil
	}
	return fail(ErrInvalidRef, "the ref names host %s but integrations.github.api.baseUrl serves %s — point baseUrl at that host's API (https://%s/api/v3), or use transport: cli with a gh login for it", host, a.host, host)
}

func (a *githubAPI) webHost(host string) string {
	if host != "" {
		return host
	}
	return a.host
}

func (a *githubAPI) authHint() string { return a.cred.hint() }

var _ githubTransport = (*githubAPI)(nil)
