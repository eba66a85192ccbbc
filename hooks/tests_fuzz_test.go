package hooks_test

import (
	"testing"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/graph/graphtest"
	"github.com/theloop-dev/theloop/hooks"
)

// test-runs.json is agent-writable: whatever it holds, verify-tests under
// check reads it without panicking, runs nothing, and decides only pass,
// skip or block.
func FuzzTestRunsRecord(f *testing.F) {
	for _, s := range []string{
		`{"version":1,"runs":[{"loop":"","workItem":"github:acme/widgets#9","node":"implementation","command":["make"],"exitCode":2,"tail":["FAIL"]}]}`,
		`{"runs":[{"node":"implementation","command":["make"],"exitCode":0,"commit":"x"}]}`,
		`{"runs":null}`, `[]`, `{"runs":[{"command":"make"}]}`, "\xff",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		a := graphtest.NewArtifacts("docs/specs/issue-9")
		if err := a.WriteFile(hooks.TestRunsFile, data); err != nil {
			t.Skip()
		}
		hc := ctxFor(a, &graph.Node{ID: "implementation"})
		hc.Mode = graph.ModeCheck
		cmds := &fakeCommands{}
		hc.RepoCommands = cmds
		r := run(t, "verify-tests", hc, graph.Values{"command": []any{"make"}})
		if cmds.argv != nil {
			t.Fatal("check ran the test command")
		}
		switch r.Status {
		case graph.StatusPass, graph.StatusSkip, graph.StatusBlock:
		default:
			t.Fatalf("status %q", r.Status)
		}
	})
}
