package graph

import (
	"context"
	"strings"
)

// NodeReport is one node's verdict in a Report.
type NodeReport struct {
	Node     string   `json:"node"`
	Status   Status   `json:"status"`
	Outcome  string   `json:"outcome"`
	Messages []string `json:"messages"`
	Forced   bool     `json:"forced"`
	Attempts int      `json:"attempts"`
}

// Report is what Status returns and `loopctl check --format json` prints.
type Report struct {
	WorkItem    string       `json:"workItem"`
	CurrentNode string       `json:"currentNode"`
	OK          bool         `json:"ok"`
	Parked      *Parked      `json:"parked"`
	Nodes       []NodeReport `json:"nodes"`
	// Warnings are notes about the evaluation itself (a reconstructed state).
	Warnings []string `json:"warnings,omitempty"`
}

// Node returns the report of node id.
func (rep *Report) Node(id string) (NodeReport, bool) {
	for _, n := range rep.Nodes {
		if n.Node == id {
			return n, true
		}
	}
	return NodeReport{}, false
}

// Status evaluates every node's exit chain, in declaration order, purely
// (ModeCheck: no writes, no network, no subprocess) and reports each
// verdict. With recompute the stored pointer, parking and forced flags are
// ignored: the current node is the first node that is not satisfied, from
// the artifacts and the recorded human decisions, skips and opt-ins alone.
// Status takes no lock and writes nothing.
func (r *Runtime) Status(ctx context.Context, id string, recompute bool) (*Report, error) {
	// With recompute the report derives the pointer itself: the missing
	// state is only noted, not evaluated twice.
	policy := missingReconstruct
	if recompute {
		policy = missingNote
	}
	s, err := r.open(ctx, id, policy)
	if err != nil {
		return nil, err
	}
	rep := r.evaluateAll(ctx, s, recompute)
	if policy == missingNote && len(s.lost) > 0 {
		r.warnLost(s, rep.CurrentNode)
	}
	rep.Warnings = append(rep.Warnings, s.warn...)
	if s.ro != nil && !s.hookAbandoned {
		// The report outlives the check; the bytes the hooks borrowed do
		// not (Borrower). A message that shares their memory by mistake
		// must not change under the caller when they are reused.
		for i := range rep.Nodes {
			nr := &rep.Nodes[i]
			if s.ro.lent(nr.Outcome) {
				nr.Outcome = strings.Clone(nr.Outcome)
			}
			for j, m := range nr.Messages {
				if s.ro.lent(m) {
					nr.Messages[j] = strings.Clone(m)
				}
			}
		}
		s.ro.settle()
	}
	return rep, nil
}

func (r *Runtime) evaluateAll(ctx context.Context, s *session, recompute bool) *Report {
	k := r.skips(ctx, s)
	rep := &Report{WorkItem: s.st.WorkItem, Nodes: make([]NodeReport, len(r.g.nodes))}
	// Every chain of the check runs in one batch: one hand-off to a worker
	// goroutine for the whole graph.
	outcomes := make([]ChainOutcome, len(r.g.nodes))
	decided := map[int]bool{}
	var jobs []chainJob
	var jobNodes []int
	var base *HookContext
	for i, n := range r.g.nodes {
		if k.has(n.ID) {
			continue
		}
		if c, ok := r.standing(s.st, n); ok {
			if err := r.verify(ctx, s, n.ID); err != nil {
				outcomes[i] = refused(n, err)
			} else {
				outcomes[i] = c
				decided[i] = true
			}
			continue
		}
		// An empty chain passes without reading its context (runChains).
		// The exit contexts of a check differ only in their node: one base
		// serves every chain, each job naming its node.
		if len(n.Exit) > 0 && base == nil {
			base = r.hookContext(ctx, s, n, Exit, ModeCheck, nil, &k)
		}
		jobs = append(jobs, chainJob{n.Exit, base, n})
		jobNodes = append(jobNodes, i)
	}
	outs, allReturned := runChainsToEnd(ctx, sharedPool, jobs)
	for j, c := range outs {
		outcomes[jobNodes[j]] = c
	}
	if !allReturned {
		s.hookAbandoned = true
	}
	first := ""
	for i, n := range r.g.nodes {
		nr := nodeReport(s.st, n, outcomes[i], decided[i], &k, recompute)
		if first == "" && nr.Status != StatusPass && nr.Status != StatusSkip {
			first = n.ID
		}
		rep.Nodes[i] = nr
	}
	if recompute {
		rep.CurrentNode = first
		if first == "" && len(r.g.nodes) > 0 {
			rep.CurrentNode = r.g.nodes[len(r.g.nodes)-1].ID
		}
	} else {
		rep.CurrentNode = s.st.CurrentNode
		if rep.CurrentNode == "" {
			rep.CurrentNode = r.g.Start
		}
		rep.Parked = s.st.Parked
	}
	rep.OK = true
	cur, declared := r.g.Node(rep.CurrentNode)
	for i, nr := range rep.Nodes {
		if declared && i > cur.Index {
			break
		}
		if nr.Status != StatusPass && nr.Status != StatusSkip {
			rep.OK = false
			break
		}
	}
	return rep
}

// nodeReport is node n's verdict: its chain's outcome c (decided: a
// recorded decision that stands), or its skip declaration, with the notes
// about refused declarations.
func nodeReport(st *State, n *Node, c ChainOutcome, decided bool, k *skipInfo, recompute bool) NodeReport {
	rec := st.Record(n.ID)
	nr := NodeReport{Node: n.ID, Attempts: rec.Attempts, Forced: rec.Forced && !recompute, Messages: []string{}}
	if d, ok := k.decl[n.ID]; ok {
		nr.Status, nr.Outcome = StatusSkip, OutcomeSkipped
		nr.Messages = append(nr.Messages, skipProvenance(d))
		return nr
	}
	nr.Status, nr.Outcome = c.Status, c.Outcome()
	for _, m := range c.Messages() {
		nr.Messages = append(nr.Messages, m.String())
	}
	if decided {
		// Say why a gate passes without an event: its recorded verdict.
		nr.Messages = append(nr.Messages, c.Results[0].Messages[0].String())
	}
	if k.invalid[n.ID] {
		nr.Messages = append(nr.Messages, "graph state declares a skip on this node, which is not skippable — the declaration is refused and has no effect")
	}
	if k.unproven[n.ID] {
		nr.Messages = append(nr.Messages, "graph state declares this human gate skipped, but no verified decision does — the declaration is refused: a gate is skipped only by a signed phase selection")
	}
	return nr
}
