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
type authorizer struct {
	users map[string]struct{}
	self  map[string]struct{}
	// deferred: routing.authorized has a rule only GitHub can answer, so
	// every named actor is admitted here and the daemon's Authority
	// decides (authority.go).
	deferred bool
}

func newAuthorizer(users, rules, self []string) authorizer {
	a := authorizer{users: map[string]struct{}{}, self: map[string]struct{}{}, deferred: deferredRules(rules)}
	for _, u := range users {
		if u = strings.TrimSpace(u); u != "" {
			a.users[u] = struct{}{}
		}
	}
	for _, u := range rules {
		if u = strings.TrimPrefix(strings.TrimSpace(u), "@"); nameShaped(strings.TrimSuffix(u, "[bot]")) {
			a.users[u] = struct{}{}
		}
	}
	for _, u := range self {
		if u != "" {
			a.self[u] = struct{}{}
		}
	}
	return a
}

// isSelf reports whether actor is loopd's own login.
func (a authorizer) isSelf(actor string) bool {
	_, ok := a.self[actor]
	return actor != "" && ok
}

// named reports whether actor is a login on the allowlist (exact,
// case-sensitive), or may be one (deferred rules, answered later by an
// Authority). An empty actor and loopd's own login are never authorized.
func (a authorizer) named(actor string) bool {
	if actor == "" || a.isSelf(actor) {
		return false
	}
	if a.deferred {
		return true
	}
	_, ok := a.users[actor]
	return ok
}

// admit is the router's and poller's one gate for a human-authored body: it
// drops self-authored text first, then anything whose author is not a named,
// allowlisted login. reason is "" when admitted.
func (a authorizer) admit(author, body string) (reason DropReason) {
	if SelfAuthored(body) || a.isSelf(author) {
		return DropSelfAuthored
	}
	if !a.named(author) {
		return DropUnauthorized
	}
	return ""
}
