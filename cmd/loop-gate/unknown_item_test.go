package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A mistyped $THE_LOOP_WORK_ITEM is said on stderr, naming the item and the
// nearest known one, and the gate stays fail-open (issue 10, item 4).
func TestUnknownWorkItemIsSaidOnStderr(t *testing.T) {
	root := writeRepo(t, atDesignBlock)
	g := newGate(t)
	g.env["THE_LOOP_WORK_ITEM"] = "issue-4"
	r := g.run(claudePayload(root), "claude")
	requireAllowed(t, r)
	require.Contains(t, r.stderr, "no such work item: issue-4")
	require.Contains(t, r.stderr, "did you mean "+fixtureItem)
	_, err := os.Stat(filepath.Join(root, "docs", "specs", "issue-4"))
	require.ErrorIs(t, err, os.ErrNotExist, "nothing is created for the unknown item")

	g.env["THE_LOOP_WORK_ITEM"] = "issue 42"
	r = g.run(claudePayload(root), "claude")
	requireAllowed(t, r)
	require.Contains(t, r.stderr, "is not a work item id")
}
