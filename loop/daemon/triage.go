package daemon

import (
	"context"

	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/loop/daemon/dispatch"
	"github.com/theloop-dev/theloop/workitem"
)

var _ dispatch.Triager = (*intake)(nil)

// Triage implements dispatch.Triager: the drops Handle would make before
// anything else — no work item, or an item with no live session that the
// event may not start (spawn policy, awaiting a start command) — decided
// before the dispatcher reads and writes its dedup records. Most
// repository activity is of that kind, and for it those records were most
// of the daemon's cost per webhook. It mirrors Handle's first branches
// exactly and answers nil (Handle decides) for anything else: a live item,
// a control command, a close.
//
// Events Handle treats before its spawn-policy check — branch-only refs
// (linkage verification may drop them, with its own event), a pull
// request closing — are left to Handle.
func (in *intake) Triage(_ context.Context, ev *ingress.Event) error {
	if len(ev.BranchOnly) > 0 || ev.Event == ingress.KindPullRequest && ev.Action == "closed" {
		return nil
	}
	item, _, live, ok := in.target(ev)
	if !ok {
		return in.dropped(workitem.Ref{}, ev, "no-work-item")
	}
	if live || (ev.Control != nil && in.conf().ControlEnabled) || in.isClose(ev, item) {
		return nil
	}
	if reason := in.refusal(item, ev, ""); reason != "" {
		return in.dropped(item, ev, reason)
	}
	return nil
}
