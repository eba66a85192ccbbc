package graph

import (
	"context"
	"fmt"
	"strings"
)

// Claim is the envelope Complete returns and `loopctl graph complete`
// prints.
type Claim struct {
	Node string `json:"node"`
	// Status is the step's (pass, wait, block, escalated), or refused or
	// noop for a claim on a node that is not current.
	Status      Status   `json:"status"`
	Outcome     string   `json:"outcome"`
	Moved       bool     `json:"moved"`
	CurrentNode string   `json:"currentNode"`
	Messages    []string `json:"messages"`
	// Reason explains a refusal: not-started, not-current, already-past.
	Reason string `json:"reason"`
}

// Complete is an agent's claim that node's work is done ("" = the current
// node). A claim is not a verdict: it records the claimant and runs the
// node's real exit chain with no event (so a human gate answers wait). A
// claim on a node behind the pointer is a no-op; on any other node that is
// not current it is refused. The whole load→evaluate→save runs under the
// state lock; a lock that stays held is an error wrapping ErrBusy, as for
// every verb that takes it.
func (r *Runtime) Complete(ctx context.Context, id, node, actor string) (*Claim, error) {
	s, unlock, err := r.openLocked(ctx, id)
	if err != nil {
		return nil, err
	}
	defer r.done(ctx, s, unlock)
	cur := s.st.CurrentNode
	if cur == "" {
		return &Claim{Node: node, Status: StepRefused, Reason: "not-started", Messages: []string{"this work item has not entered the graph; nothing to complete"}}, nil
	}
	claimed := node
	if claimed == "" {
		claimed = cur
	}
	if claimed != cur {
		c := &Claim{Node: claimed, CurrentNode: cur, Messages: []string{fmt.Sprintf("the current node is '%s'", cur)}}
		if r.g.Before(claimed, cur) {
			c.Status, c.Reason = StepNoop, "already-past"
			c.Messages[0] += " and the claimed node is behind it"
		} else {
			c.Status, c.Reason = StepRefused, "not-current"
			if _, ok := r.g.Node(claimed); !ok {
				c.Messages = append(c.Messages, fmt.Sprintf("'%s' is not a node of this graph; declared nodes are: %s", claimed, strings.Join(r.g.IDs(), ", ")))
			}
		}
		return c, nil
	}
	by := actor
	if by == "" {
		by = "cli"
	}
	s.st.Completions.Set(claimed, Completion{At: s.stamp(), By: by})
	// The claim record is saved with the chain's outcome, which every
	// outcome of advance saves; a crash before that loses only the record
	// of a claim nobody was answered. An advance that saved nothing (it
	// returned early) leaves the record to a save of its own.
	saves := s.saves
	step, err := r.advance(ctx, s, nil)
	if err != nil {
		return nil, err
	}
	if s.saves == saves {
		if err := r.saveProvisionally(ctx, s); err != nil {
			return nil, err
		}
	}
	return &Claim{Node: claimed, Status: step.Status, Outcome: step.Outcome, Moved: s.st.CurrentNode != cur,
		CurrentNode: s.st.CurrentNode, Messages: step.Messages}, nil
}
