package loop_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/loop"
)

func TestExplainGraphErrorNamesTheCommand(t *testing.T) {
	notStarted := fmt.Errorf("issue-9: %w", graph.ErrNotStarted)
	unknown := &graph.UnknownNodeError{WorkItem: "issue-2", Node: "old", Graph: "g", Declared: []string{"a", "b"}, Current: true}
	unknownArg := &graph.UnknownNodeError{WorkItem: "issue-2", Node: "desgin", Graph: "g", Declared: []string{"a", "b"}}
	other := errors.New("disk full")
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"not started", notStarted, "issue-9: work item has not entered the graph; start it first (the daemon does on `the-loop start`, or `loopctl graph run`)"},
		{"pointer on an undeclared node", unknown, "issue-2: the current node 'old' is not declared in graph g: unknown node (declared nodes: a, b); move it with `loopctl graph force issue-2 --to <node> --reason ...`"},
		{"an undeclared node argument", unknownArg, "unknown node 'desgin'; declared nodes are: a, b"},
		{"anything else", other, "disk full"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := loop.ExplainGraphError(tc.err)
			require.EqualError(t, got, tc.want)
			require.ErrorIs(t, got, tc.err, "the explained error still matches the kernel's")
		})
	}
	require.NoError(t, loop.ExplainGraphError(nil))
}
