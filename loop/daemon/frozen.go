package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/hooks"
	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/workitem"
)

// The phase selection loopd records (the frozen graph: which nodes are
// skipped and opted in, the surface, the PR-session mode) lives in
// graph-state.json, in the checkout, where the agent can edit it. loopd
// keeps its own copy under the state root — the work item's portable
// record, section "graph" (docs/daemon.md §5.3) — and trusts that one: a
// selection in the checkout that differs from it is refused (its gate
// blocks, naming the file), and loopd reads the PR-session mode from its
// copy. The signature of a signed decision covers the same fields; the
// copy also holds where no decision-signing key is configured.

// frozenSigner records the copy when loopd records a phase selection, then
// lets the next signer (nil: none) sign the decision.
type frozenSigner struct {
	next   graph.DecisionSigner
	store  *ingress.PortableStore
	record emitFunc
}

func (f frozenSigner) SignDecision(ctx context.Context, sub graph.DecisionSubject, arts graph.Artifacts, gated []string, d *graph.Decision) error {
	var err error
	if f.next != nil {
		err = f.next.SignDecision(ctx, sub, arts, gated, d)
	}
	if len(d.Graph) == 0 {
		return err
	}
	ref, perr := frozenRef(sub)
	if perr == nil {
		perr = f.store.SaveFrozenGraph(ref, d.Graph)
	}
	if f.record != nil {
		if perr != nil {
			f.record("graph.frozen_publish_failed", graph.LevelWarning, graph.Field{Key: "work_item", Value: sub.Ref}, graph.Field{Key: "error", Value: perr.Error()})
		} else {
			f.record("graph.frozen", graph.LevelInfo, graph.Field{Key: "work_item", Value: sub.Ref}, graph.Field{Key: "path", Value: f.store.Path(ref)})
		}
	}
	return err
}

func frozenRef(sub graph.DecisionSubject) (workitem.Ref, error) {
	ref, err := workitem.Parse(sub.Ref)
	if err != nil {
		return workitem.Ref{}, err
	}
	return ref.Canonical()
}

// frozenVerifier refuses a phase selection that differs from loopd's copy,
// after the next verifier (nil: none) accepted it.
type frozenVerifier struct {
	next  graph.DecisionVerifier
	store *ingress.PortableStore
}

func (f frozenVerifier) VerifyDecision(ctx context.Context, sub graph.DecisionSubject, arts graph.Artifacts, d graph.Decision) error {
	if f.next != nil {
		if err := f.next.VerifyDecision(ctx, sub, arts, d); err != nil {
			return err
		}
	}
	if sub.Gate != hooks.SelectionDecision && len(d.Graph) == 0 {
		return nil // another gate's decision: no selection to compare
	}
	ref, err := frozenRef(sub)
	if err != nil {
		return nil // not an item loopd keeps records for
	}
	trusted, err := f.store.FrozenGraph(ref)
	if err != nil || trusted == nil {
		// No copy: recorded before loopd kept one, or by the CLI. An
		// unreadable copy is the operator's to fix; the signature still
		// stands guard.
		return nil
	}
	if what := frozenDiff(trusted, d); what != "" {
		return fmt.Errorf("%w: the %s decision in graph-state.json has %s, unlike loopd's copy in %s; restore the selection (git checkout the state file) or ask for a new selection on the ticket",
			graph.ErrDecisionAltered, sub.Gate, what, f.store.Path(ref))
	}
	return nil
}

// frozenSelection is what a frozen graph says of the selection.
type frozenSelection struct {
	Surface      string `json:"surface"`
	SessionPerPr string `json:"sessionPerPr"`
	Nodes        []struct {
		ID      string `json:"id"`
		Skipped bool   `json:"skipped"`
		OptIn   bool   `json:"optIn"`
	} `json:"nodes"`
}

// frozenDiff names what of d differs from the trusted frozen graph ("" when
// nothing does): the frozen graph itself, or the fields the runtime honours
// beside it (surface, PR-session mode, skips, opt-ins). Only field names,
// never values, reach the message.
func frozenDiff(trusted json.RawMessage, d graph.Decision) string {
	var want, have any
	if json.Unmarshal(trusted, &want) != nil {
		return ""
	}
	if len(d.Graph) == 0 || json.Unmarshal(d.Graph, &have) != nil || !reflect.DeepEqual(want, have) {
		return "another frozen graph"
	}
	var sel frozenSelection
	if json.Unmarshal(trusted, &sel) != nil {
		return ""
	}
	switch {
	case d.Surface != sel.Surface:
		return "another surface"
	case d.SessionPerPr != sel.SessionPerPr:
		return "another sessionPerPr"
	}
	skipped := map[string]bool{}
	var optIns []string
	for _, n := range sel.Nodes {
		skipped[n.ID] = n.Skipped
		if n.OptIn && !n.Skipped {
			optIns = append(optIns, n.ID)
		}
	}
	for _, id := range d.Skips {
		if !skipped[id] {
			return "skips the frozen graph does not"
		}
	}
	got := slices.Clone(d.OptIns)
	slices.Sort(got)
	slices.Sort(optIns)
	if !slices.Equal(got, optIns) {
		return "other opt-ins"
	}
	return ""
}

// frozenSessionPerPr is the PR-session mode of loopd's copy of item's
// phase selection ("" when it keeps none).
func (c *controlStore) frozenSessionPerPr(item workitem.Ref) string {
	r, err := refOf(item)
	if err != nil {
		return ""
	}
	raw, err := c.ps.FrozenGraph(r)
	if err != nil || raw == nil {
		return ""
	}
	var sel frozenSelection
	if json.Unmarshal(raw, &sel) != nil {
		return ""
	}
	return sel.SessionPerPr
}

var (
	_ graph.DecisionSigner   = frozenSigner{}
	_ graph.DecisionVerifier = frozenVerifier{}
)
