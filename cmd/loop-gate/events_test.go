package main

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/loop"
)

// NFR5: loop-gate writes its block and allow decisions to the event log
// the operator's CLI config names, in the envelope loopctl and the daemon
// use, so `loopctl events` shows them beside the graph's own events.
func TestDecisionsLandInTheEventLog(t *testing.T) {
	root := writeRepo(t, atDesignBlock)
	state := t.TempDir()
	logPath := filepath.Join(state, "logs", "events.jsonl")
	g := newGate(t)
	g.env["THE_LOOP_WORK_ITEM"] = fixtureItem
	cfg := filepath.Join(state, "cli-config.yaml")
	writeFile(t, cfg, "state:\n  root: "+state+"\n")
	g.env[loop.CLIConfigEnv] = cfg

	requireClaudeBlock(t, g.run(claudePayload(root), "claude"))
	setStage(t, root, atDesignApprovalWait)
	r := g.run(claudePayload(root), "claude")
	require.Equal(t, "", r.stdout, "a human gate lets the agent stop")

	recs, err := loop.ReadEvents(logPath, loop.EventQuery{})
	require.NoError(t, err)
	require.Len(t, recs, 2, r.stderr)
	blocked, allowed := recs[0], recs[1]
	for _, rec := range recs {
		require.Equal(t, "loop-gate", rec.Source)
		v, _ := rec.Get("work_item")
		require.Equal(t, fixtureItem, v)
	}
	require.Equal(t, "gate.blocked", blocked.Event)
	require.Equal(t, graph.LevelWarning, blocked.Level)
	node, _ := blocked.Get("node")
	require.Equal(t, "design", node)
	attempt, _ := blocked.Get("attempt")
	require.Equal(t, json.Number("1"), attempt)
	require.Equal(t, "gate.allowed", allowed.Event)
	node, _ = allowed.Get("node")
	require.Equal(t, "design-approval", node)
}
