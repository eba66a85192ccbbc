package ingress

import (
	"strings"

	"github.com/theloop-dev/theloop/hooks"
)

// SelfAuthored reports whether a comment body carries the-loop's own marker
// (<!-- the-loop:agent-comment -->, hooks.Marker). Such a body is dropped by
// both ingresses before authorization, whoever posted it (docs/daemon.md §0.2).
func SelfAuthored(body string) bool { return strings.Contains(body, hooks.Marker) }

// authorizer is the allowlist predicate (docs/daemon.md §0.3), shared by the
// router and the poller.
type authorizer map[string]struct{}

func newAuthorizer(users []string) authorizer {
	a := make(authorizer, len(users))
	for _, u := range users {
		if u = strings.TrimSpace(u); u != "" {
			a[u] = struct{}{}
		}
	}
	return a
}

// named reports whether actor is a login on the allowlist (exact,
// case-sensitive). An empty actor is never authorized here.
func (a authorizer) named(actor string) bool {
	if actor == "" {
		return false
	}
	_, ok := a[actor]
	return ok
}

// admit is the router's and poller's one gate for a human-authored body: it
// drops self-authored text first, then anything whose author is not a named,
// allowlisted login. reason is "" when admitted.
func (a authorizer) admit(author, body string) (reason DropReason) {
	if SelfAuthored(body) {
		return DropSelfAuthored
	}
	if !a.named(author) {
		return DropUnauthorized
	}
	return ""
}
