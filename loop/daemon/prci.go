package daemon

import (
	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/workitem"
)

// notePRCI hands a routed event's pull-request, review and check facts to
// the dashboard (dashboard.PRCI), under the work items it concerns — the
// refs the router extracted and, for a linked pull request, the work item
// that owns it. Nothing is kept without a dashboard, and the rows whose
// state changed are refreshed live.
// resolve names the work item that owns a linked pull request.
func (h *dashHost) notePRCI(ev *ingress.Event, resolve func(workitem.Ref) workitem.Ref) {
	if ingress.KindOf(ev.Event).PRCI == ingress.PRCINone {
		return
	}
	if h.listen == "" {
		return // nothing shows it
	}
	seen := map[string]bool{}
	var refs []string
	for _, r := range ev.WorkItems {
		for _, x := range []string{r.String(), resolve(r).String()} {
			if !seen[x] {
				seen[x] = true
				refs = append(refs, x)
			}
		}
	}
	if !h.prci.Note(ev.Event, refs, ev.Payload) {
		return
	}
	// A webhook's row is refreshed by its observation; a fact the
	// reconcile pass read has none, so the rows are told here.
	h.refresh(refs...)
}
