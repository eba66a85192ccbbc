package loop_test

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/graph/graphfile"
	"github.com/theloop-dev/theloop/loop"
)

// conformanceDir is the-loop v11.2's own repository with its verdicts; it is
// not part of this project, so tests skip where it is absent.
var conformanceDir = filepath.Join("..", "..", "shared", "conformance", "the-loop-v11")

type expectedItem struct {
	CurrentNode string `json:"currentNode"`
	OK          bool   `json:"ok"`
	Nodes       []struct {
		Node    string `json:"node"`
		Status  string `json:"status"`
		Outcome string `json:"outcome"`
	} `json:"nodes"`
}

func loadExpected(t testing.TB) map[string]expectedItem {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(conformanceDir, "expected.json"))
	if errors.Is(err, fs.ErrNotExist) {
		t.Skip("conformance data not present (../shared/conformance)")
	}
	require.NoError(t, err)
	var exp map[string]expectedItem
	require.NoError(t, json.Unmarshal(data, &exp))
	return exp
}

// copyTree copies the read-only conformance repository into dst.
func copyTree(t testing.TB, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	require.NoError(t, err)
}

// TestConformanceWithTheLoopV11 runs `check --recompute` over every work
// item the-loop v11.2 reported on, with its own graph, and requires the same
// current node and the same status for every node.
func TestConformanceWithTheLoopV11(t *testing.T) {
	exp := loadExpected(t)
	repo := t.TempDir()
	copyTree(t, filepath.Join(conformanceDir, "repo"), repo)
	rt, err := loop.Open(repo, loop.Options{Graph: loadGraph(t, filepath.Join(conformanceDir, "graphs", "pdlc-work-item-loop.yaml"))})
	require.NoError(t, err)

	ids := make([]string, 0, len(exp))
	for id := range exp {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	agreeItems, agreeNodes, totalNodes := 0, 0, 0
	for _, id := range ids {
		want := exp[id]
		rep, err := rt.Status(context.Background(), id, true)
		require.NoError(t, err, id)
		itemOK := rep.CurrentNode == want.CurrentNode && rep.OK == want.OK && len(rep.Nodes) == len(want.Nodes)
		if rep.CurrentNode != want.CurrentNode {
			t.Errorf("%s: currentNode %s, the-loop says %s", id, rep.CurrentNode, want.CurrentNode)
		}
		for i, wn := range want.Nodes {
			totalNodes++
			if i >= len(rep.Nodes) {
				itemOK = false
				continue
			}
			got := rep.Nodes[i]
			if got.Node == wn.Node && string(got.Status) == wn.Status {
				agreeNodes++
				continue
			}
			itemOK = false
			t.Errorf("%s: node %s status %s (%v), the-loop says %s", id, got.Node, got.Status, got.Messages, wn.Status)
		}
		if itemOK {
			agreeItems++
		}
	}
	t.Logf("conformance: %d/%d work items agree fully; %d/%d node verdicts agree", agreeItems, len(ids), agreeNodes, totalNodes)
}

// loadGraph compiles a graph file against theloop's hooks.
func loadGraph(t testing.TB, path string) *graph.Graph {
	t.Helper()
	src, err := os.ReadFile(path)
	require.NoError(t, err)
	g, err := graphfile.Load(path, src, loop.ShippedHooks())
	require.NoError(t, err)
	return g
}
