package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The fixtures are work items of the shipped work-item loop in a temporary
// repository, built so that `check --recompute` lands on a chosen node. The
// stored pointer always says `design`: recompute must ignore it.

const (
	fixtureItem = "issue-42"
	at          = "2026-05-04T09:00:00Z"
)

const requirementsMD = `# Requirements

## Requirements

1. The widget counts.

## Security considerations

The trust boundary is the public form.
`

const designPartialMD = `# Design

## Architecture

One widget.
`

const designMD = `# Design

## Architecture

One widget.

## Security design

The trust boundary is the public form; it validates input.

## Testing strategy

Tables.
`

const testingPlanMD = `# Testing plan

## Test matrix

- unit

## Verification environment

CI.

## Evidence plan

Logs.

## Verification results

Pending.
`

const tasksOpenMD = `# Tasks

## Task list

- [x] count widgets
- [ ] display the count
`

const executionLogMD = `# Execution log
`

// stage is how far a fixture work item has come.
type stage int

const (
	// atDesignBlock: design.md lacks two sections; recompute → design, block.
	atDesignBlock stage = iota
	// atDesignApprovalWait: design and testing plan done; recompute →
	// design-approval, a human gate: wait.
	atDesignApprovalWait
	// atImplementationBlock: five artifacts, gates approved, a task still
	// open; recompute → implementation, block (the benchmark's mid-graph node).
	atImplementationBlock
	// allDone: every skippable node declared skipped; recompute → complete, pass.
	allDone
)

// writeRepo creates a repository (a .git directory is all the gate looks
// for) holding fixtureItem at stage s, and returns its root.
func writeRepo(t testing.TB, s stage) string {
	t.Helper()
	root := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(root, ".git"), 0o755))
	setStage(t, root, s)
	return root
}

// setStage rewrites the work item's folder for stage s.
func setStage(t testing.TB, root string, s stage) {
	t.Helper()
	spec := filepath.Join(root, "docs", "specs", fixtureItem)
	require.NoError(t, os.RemoveAll(spec))
	decisions := []string{decision("phase-selection", "selected"), decision("requirements-approval", "approved")}
	skips := []string{skip("brainstorming")}
	files := map[string]string{"requirements.md": requirementsMD}
	switch s {
	case atDesignBlock:
		files["design.md"] = designPartialMD
	case atDesignApprovalWait:
		files["design.md"] = designMD
		files["testing-plan.md"] = testingPlanMD
	case atImplementationBlock:
		files["design.md"] = designMD
		files["testing-plan.md"] = testingPlanMD
		files["tasks.md"] = tasksOpenMD
		files["execution-log.md"] = executionLogMD
		decisions = append(decisions, decision("design-approval", "approved"))
	case allDone:
		files = map[string]string{}
		decisions = decisions[:1]
		skips = nil
		for _, n := range []string{"brainstorming", "requirements-definition", "requirements-approval", "design", "test-planning",
			"design-approval", "tasks-breakdown", "implementation", "verification", "self-review", "critic-review",
			"security-review", "evidence", "capability-docs", "reviewer-briefing", "human-approval"} {
			skips = append(skips, skip(n))
		}
	}
	files["graph-state.json"] = `{"version": 1, "workItem": "` + fixtureItem + `", "currentNode": "design",
  "decisions": {` + strings.Join(decisions, ",") + `},
  "skips": {` + strings.Join(skips, ",") + `},
  "loop": "pdlc-work-item-loop"}
`
	for name, content := range files {
		writeFile(t, filepath.Join(spec, name), content)
	}
}

func decision(node, outcome string) string {
	return `"` + node + `": {"at": "` + at + `", "outcome": "` + outcome + `", "by": "@dana"}`
}

func skip(node string) string {
	return `"` + node + `": {"via": "phase-selection", "token": "` + node + `", "by": "@dana", "reason": "fixture", "at": "` + at + `"}`
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
}
