package loop

import (
	"errors"

	"github.com/theloop-dev/theloop/graph"
)

// ExplainGraphError returns err with the step that gets the work item past
// it appended, or err itself when there is none. The kernel's errors state
// facts (graph.ErrNotStarted, *graph.UnknownNodeError); the product names
// its own commands, here, for loopctl and the daemon's API alike. The
// result still matches err (errors.Is, errors.As).
func ExplainGraphError(err error) error {
	var une *graph.UnknownNodeError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, graph.ErrNotStarted):
		return &explained{err, "start it first (the daemon does on `the-loop start`, or `loopctl graph run`)"}
	case errors.As(err, &une) && une.Current:
		return &explained{err, "move it with `loopctl graph force " + une.WorkItem + " --to <node> --reason ...`"}
	}
	return err
}

type explained struct {
	err  error
	hint string
}

func (e *explained) Error() string { return e.err.Error() + "; " + e.hint }
func (e *explained) Unwrap() error { return e.err }
