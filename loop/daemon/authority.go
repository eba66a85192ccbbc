package daemon

import (
	"context"
	"slices"
	"strings"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/workitem"
)

// Who may act (docs/decisions.md §25): routing.authorizedUsers, then the
// rules of routing.authorized answered by GitHub through an
// ingress.Authority. The same answer serves gates (with the gated
// artifacts' paths, for codeowners) and control keywords (without).

// authorizingRule is the rule that lets login act on item ("" none). An
// error means GitHub could not be asked: fail closed, try again later.
func authorizingRule(ctx context.Context, users []string, a *ingress.Authority, login string, item workitem.Ref, paths []string) (string, error) {
	if login == "" {
		return "", nil
	}
	if slices.Contains(users, login) {
		return ingress.RuleAuthorizedUsers, nil
	}
	return a.Authorize(ctx, ingress.Subject{Login: login, Item: item, Paths: paths})
}

// gatedPaths are the repository paths of the artifacts node n locks (its
// lock-artifacts hooks' artifacts; "a.md|b.md" names alternatives, all
// listed), under the spec directory of work item id.
func gatedPaths(n *graph.Node, specDir, id string) []string {
	if n == nil {
		return nil
	}
	var out []string
	for _, h := range n.Exit {
		if h.Name != "lock-artifacts" {
			continue
		}
		for _, a := range graph.AsStrings(h.Params["artifacts"]) {
			for _, alt := range strings.Split(a, "|") {
				if alt = strings.TrimSpace(alt); alt != "" {
					out = append(out, strings.Trim(specDir, "/")+"/"+id+"/"+alt)
				}
			}
		}
	}
	return out
}

// admitActor asks the Authority about an event's actor the Router could
// not judge (routing.authorized holds rules only GitHub answers): an
// actor with no right is dropped here, before the event spawns, controls
// or reaches a session, as the Router drops one it can judge. Closes pass,
// as in the Router: a close can only tear down.
func (in *intake) admitActor(ctx context.Context, item workitem.Ref, ev *ingress.Event) (bool, error) {
	a := in.authority
	if a == nil || ev.Actor == "" || in.isClose(ev, item) {
		return true, nil
	}
	if ingress.IsPresence(ev) {
		// The poller offers an item whose author may not act when an
		// authorized person recorded its start (ingress.Poller.presence).
		if started, _ := in.ctl.StartRequested(item); started {
			return true, nil
		}
	}
	rule, err := authorizingRule(ctx, in.conf().AuthorizedUsers, a, ev.Actor, item, nil)
	if err != nil {
		return false, err
	}
	return rule != "", nil
}

// authorizedActor is authorizingRule for a control command's actor.
func (in *intake) authorizedActor(ctx context.Context, item workitem.Ref, actor string) (bool, error) {
	rule, err := authorizingRule(ctx, in.conf().AuthorizedUsers, in.authority, actor, item, nil)
	return rule != "", err
}
