package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
)

// writeJSON streams a list of reports one at a time; the bytes must be
// what one encoder gives for the whole list (CI parses and diffs them).
func TestWriteReportsJSONIsEncoderOutput(t *testing.T) {
	rep := func(id string, msgs ...string) *graph.Report {
		return &graph.Report{WorkItem: id, CurrentNode: "design", Warnings: []string{"<a & b>"},
			Nodes: []graph.NodeReport{{Node: "design", Status: graph.StatusBlock, Messages: msgs}, {Node: "tasks"}}}
	}
	for _, tc := range []struct {
		name string
		reps []*graph.Report
	}{
		{"empty", []*graph.Report{}},
		{"nil", nil},
		{"one", []*graph.Report{rep("issue-1", "missing ## Design")}},
		{"several", []*graph.Report{rep("issue-1"), rep("issue-2", "a\nb", "\"quoted\""), {WorkItem: "issue-3"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var want bytes.Buffer
			enc := json.NewEncoder(&want)
			enc.SetEscapeHTML(false)
			enc.SetIndent("", "  ")
			require.NoError(t, enc.Encode(tc.reps))
			var got bytes.Buffer
			writeJSON(&got, tc.reps)
			require.Equal(t, want.String(), got.String())
		})
	}
}
