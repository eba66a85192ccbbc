package graph

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors, for the conditions a caller branches on. Compare with
// errors.Is: the runtime wraps them with the work item, node or key.
var (
	// ErrInvalidGraph is matched by every *LoadError.
	ErrInvalidGraph = errors.New("invalid graph")
	// ErrNoState: the work item has no saved state (it never started).
	ErrNoState = errors.New("no graph state")
	// ErrCorruptState: the saved state could not be parsed. The Store keeps
	// the unparseable bytes and preserves them beside the state file when it
	// next saves; the runtime reconstructs the state by recompute.
	ErrCorruptState = errors.New("graph state is unparseable")
	// ErrBusy: another process holds the work item's state lock.
	ErrBusy = errors.New("another theloop process holds the graph-state lock")
	// ErrNotStarted: the work item has not entered the graph.
	ErrNotStarted = errors.New("work item has not entered the graph")
	// ErrUnknownNode: a node id that the graph does not declare.
	ErrUnknownNode = errors.New("unknown node")
	// ErrReasonRequired: an override (force, skip) without a reason.
	ErrReasonRequired = errors.New("a reason is required")
	// ErrUnsupportedOperation is returned (wrapped) by an Integrations whose
	// configuration provides no provider for an operation. Hooks treat it
	// as a deliberate absence (skip), not an outage.
	ErrUnsupportedOperation = errors.New("operation not configured")
	// ErrCommandNotFound is wrapped by Commands.Run when the program is not
	// installed.
	ErrCommandNotFound = errors.New("command not found")

	// The ways a recorded decision can fail: a DecisionVerifier wraps one.

	// ErrDecisionUnsigned: the decision carries no signature.
	ErrDecisionUnsigned = errors.New("decision is not signed")
	// ErrDecisionBadSignature: the signature does not verify over the
	// record: it was altered after signing, or forged.
	ErrDecisionBadSignature = errors.New("decision signature does not verify")
	// ErrDecisionReplayed: a valid signature over another work item, loop
	// or gate — a decision copied from elsewhere.
	ErrDecisionReplayed = errors.New("decision was signed for another work item or gate")
	// ErrDecisionStale: an artifact the decision approved has changed since.
	ErrDecisionStale = errors.New("an approved artifact changed after the decision")
	// ErrDecisionUnknownKey: signed by a key that is not trusted.
	ErrDecisionUnknownKey = errors.New("decision is signed by an untrusted key")
	// ErrDecisionAltered: the decision differs from the copy its recorder
	// kept outside the checkout (loopd's frozen phase selection).
	ErrDecisionAltered = errors.New("decision differs from the recorder's own copy")
)

// UnknownNodeError is a node id the graph does not declare, with the ids it
// does. It matches ErrUnknownNode (errors.Is). The runtime states the fact;
// the caller says what to do about it (the command that moves a pointer
// differs between a CLI, a daemon and an embedder).
type UnknownNodeError struct {
	WorkItem string
	// Node is the undeclared id.
	Node  string
	Graph string
	// Declared are the graph's node ids, in declaration order.
	Declared []string
	// Current is set when Node is the work item's stored pointer (its
	// graph-state.json names a node the graph lacks), not an argument.
	Current bool
}

func (e *UnknownNodeError) Error() string {
	if e.Current {
		return fmt.Sprintf("%s: the current node '%s' is not declared in graph %s: %v (declared nodes: %s)", e.WorkItem, e.Node, e.Graph, ErrUnknownNode, strings.Join(e.Declared, ", "))
	}
	return fmt.Sprintf("%v '%s'; declared nodes are: %s", ErrUnknownNode, e.Node, strings.Join(e.Declared, ", "))
}

// Is lets errors.Is(err, ErrUnknownNode) match.
func (e *UnknownNodeError) Is(target error) bool { return target == ErrUnknownNode }

// Problem is one thing wrong with a graph file.
type Problem struct {
	// Where is "<file>:<line>:<col>" (or just the file when the position is
	// unknown).
	Where string
	// Path locates the offending element, e.g. "nodes[3].exit[0]".
	Path string
	// Message says what is wrong and, where it can, how to fix it.
	Message string
}

func (p Problem) String() string {
	if p.Where == "" {
		return p.Message
	}
	return p.Where + ": " + p.Message
}

// LoadError reports every problem found while parsing or compiling a graph.
type LoadError struct {
	Source   string
	Problems []Problem
}

func (e *LoadError) Error() string {
	var b strings.Builder
	src := e.Source
	if src == "" {
		src = "graph"
	}
	if len(e.Problems) == 1 {
		fmt.Fprintf(&b, "invalid graph %s: %s", src, e.Problems[0])
		return b.String()
	}
	fmt.Fprintf(&b, "invalid graph %s: %d problems:", src, len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n  - ")
		b.WriteString(p.String())
	}
	return b.String()
}

// Is lets errors.Is(err, ErrInvalidGraph) match.
func (e *LoadError) Is(target error) bool { return target == ErrInvalidGraph }
