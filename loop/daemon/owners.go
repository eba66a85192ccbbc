package daemon

import (
	"sync"

	"github.com/theloop-dev/theloop/sessions"
	"github.com/theloop-dev/theloop/workitem"
)

// Who serves a ref: the work item whose session an event's ref reaches —
// the ref itself, or the work item a pull request is linked to. The
// intake's routing (intake.go), the linkage check (linkage.go) and the
// pull-request sessions (prsessions.go) all ask here; nothing here asks
// them back.

func (in *intake) live(item workitem.Ref) (sessions.Record, bool) {
	rec, err := in.reg.Get(item)
	if err != nil {
		return sessions.Record{}, false
	}
	return rec, rec.Status.Live()
}

// prIndex maps a pull request to the work items it is linked to (most
// often one; a PR once linked to a work item that closed may be linked to
// another since). It is built from the registry on first use and kept up
// to date by the links this daemon writes.
type prIndex struct {
	mu     sync.Mutex
	loaded bool
	owners map[string][]workitem.Ref
}

func prKey(pr workitem.Ref) string { return lowerRef(pr.String()) }

func (p *prIndex) add(pr, owner workitem.Ref) {
	k := prKey(pr)
	for _, o := range p.owners[k] {
		if o == owner {
			return
		}
	}
	p.owners[k] = append(p.owners[k], owner)
}

func (p *prIndex) load(reg *sessions.Registry) {
	if p.loaded {
		return
	}
	p.owners = map[string][]workitem.Ref{}
	recs, _ := reg.List()
	for _, r := range recs {
		for _, l := range r.PullRequests {
			p.add(l.PR, r.Item)
		}
		if !r.Parent.IsZero() {
			p.add(r.Item, r.Parent)
		}
	}
	p.loaded = true
}

// ownersOfPR returns the work items pr is linked to.
func (in *intake) ownersOfPR(pr workitem.Ref) []workitem.Ref {
	in.prs.mu.Lock()
	defer in.prs.mu.Unlock()
	in.prs.load(in.reg)
	return append([]workitem.Ref(nil), in.prs.owners[prKey(pr)]...)
}

func (in *intake) notePR(pr, owner workitem.Ref) {
	in.prs.mu.Lock()
	defer in.prs.mu.Unlock()
	in.prs.load(in.reg)
	in.prs.add(pr, owner)
}

// resolve maps a ref to the work item whose session serves it: the work
// item with a live session a pull request is linked to (else the first it
// was linked to), else the ref itself.
func (in *intake) resolve(item workitem.Ref) workitem.Ref {
	owners := in.ownersOfPR(item)
	for _, o := range owners {
		if _, live := in.live(o); live {
			return o
		}
	}
	if len(owners) > 0 {
		return owners[0]
	}
	return item
}

// ownerOf is resolve for a ref as the event carries it.
func (in *intake) ownerOf(r workitem.Ref) (workitem.Ref, bool) {
	item, err := r.Canonical()
	if err != nil {
		return workitem.Ref{}, false
	}
	return in.resolve(item), true
}

// linkKey is a ref's cache key (names compared as GitHub does).
func linkKey(r workitem.Ref) string { return lowerRef(r.String()) }

func lowerRef(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
