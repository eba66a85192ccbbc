package main

import (
	"bytes"
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

// A payload over the 1 MiB bound is reported as such, not as "unexpected
// end of JSON input" (issue 10, item 14); the gate still checks the item
// from the process's directory.
func TestOversizedPayloadIsSaidAsSuch(t *testing.T) {
	root := writeRepo(t, atDesignBlock)
	g := newGate(t)
	g.env["THE_LOOP_WORK_ITEM"] = fixtureItem
	g.workDir = root
	big := append([]byte(`{"cwd":"`), bytes.Repeat([]byte("x"), 1<<20+10)...)
	r := g.run(append(big, '"', '}'), "claude")
	require.Equal(t, 0, r.code)
	require.Contains(t, r.stderr, "the payload is 1048576 bytes or more")
	require.NotContains(t, r.stderr, "unexpected end of JSON input")
	requireClaudeBlock(t, r)
}
