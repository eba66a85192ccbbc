package agent

// The artifacts a competent agent writes for the demo work item ("export
// the weekly report as CSV"). Both demos use them: `loopctl demo` in its
// in-process walk and the scripted agent `loopd demo` runs in tmux. Each is
// valid for the shipped pdlc-work-item-loop's exit chains (sections,
// checkmarks, the trust-boundary markers design.md must answer), except the
// drafts, which are the deliberate mistakes the gates catch.
const (
	// RequirementsDraft lacks the "Security considerations" section
	// requirements-definition requires.
	RequirementsDraft = `# Requirements — export the weekly report as CSV

## Requirements

1. WHEN an operator runs ` + "`report export --csv`" + ` THEN the system SHALL write the report as CSV.
`
	// Requirements passes requirements-definition.
	Requirements = RequirementsDraft + `
## Security considerations

The output path crosses a trust boundary: it is operator-supplied.
Abuse case: a path pointing outside the workspace.
`
	// DesignDraft has every section but does not answer the trust boundary
	// and abuse case requirements.md names.
	DesignDraft = `# Design — CSV export

## Architecture

` + "```mermaid" + `
flowchart LR
  R[report] --> W["csv writer"] --> F[(file)]
` + "```" + `

## Security design

Paths are resolved before writing.

## Testing strategy

Table tests over sample reports.
`
	// Design passes design.
	Design = DesignDraft + `
The trust boundary is the output path; the abuse case (a path outside the
workspace) is refused after resolution.
`
	// TestingPlan passes test-planning. It is a plan only: design-approval
	// locks it, and verification records its results in the execution log
	// (LogVerification), never here (docs/decisions.md §21).
	TestingPlan = `# Testing plan

## Test matrix

- M1 CSV of an empty report — unit — ` + "`go test ./report -run TestCSV/empty`" + `
- M2 CSV of a report with quotes and commas — unit — ` + "`go test ./report -run TestCSV/quoting`" + `

## Verification environment

Go 1.26 on Linux.

## Evidence plan

Test output for each row, recorded under Verification results in the
execution log and attached to the pull request.
`
	// TasksOpen passes tasks-breakdown (and fails implementation: tasks
	// are open).
	TasksOpen = "# Tasks\n\n## Task list\n\n- [ ] CSV writer\n- [ ] wire `report export --csv`\n"
	// TasksDone passes implementation.
	TasksDone = "# Tasks\n\n## Task list\n\n- [x] CSV writer\n- [x] wire `report export --csv`\n"
	// Brainstorm passes brainstorming, for a walk that keeps it.
	Brainstorm = `# Brainstorm — CSV export

## Problem / opportunity

Operators copy the weekly report into spreadsheets by hand.

## Open questions

- Which CSV dialect? (RFC 4180 unless someone objects.)
`
)

// LogSection is a section appended to the work item's execution-log.md.
type LogSection struct {
	Heading string // "Review cycles" → "## Review cycles"
	Body    string
}

// Execution-log sections the review chain's nodes look for.
var (
	LogReviewCycles   = LogSection{"Review cycles", "Round 1: one finding (an unchecked error), fixed."}
	LogCriticReview   = LogSection{"Review cycles", "Critic round (a second model): no further findings."}
	LogSecurityReview = LogSection{"Security review (gate)", "The output path is resolved and confined; no secrets handled."}
	LogEvidence       = LogSection{"Final validation evidence", "go test ./... — ok."}
	LogCapabilityDocs = LogSection{"Capability docs", "`report export --csv` documented in docs/report.md."}
	LogPullRequests   = LogSection{"Pull requests", "- PR #7 — CSV export, ready for review."}
	LogDesignCritic   = LogSection{"Design critic review", "A second model read design.md against the requirements: no gaps."}
	// LogVerification is verification's record: one ticked box per row of
	// the locked testing plan's matrix, with its command and result.
	LogVerification = LogSection{"Verification results", "- [x] M1 CSV of an empty report — `go test ./report -run TestCSV/empty` — pass\n- [x] M2 CSV of a report with quotes and commas — `go test ./report -run TestCSV/quoting` — pass"}
)

// Turn is one attempt at a node's work: the files the agent writes (paths
// relative to the work item's spec directory), the execution-log sections
// it appends, and what it says it is doing. After a turn the agent claims
// the node with `loopctl graph complete`.
type Turn struct {
	Say   string
	Files map[string]string
	Log   []LogSection
}

// Script is the scripted agent's work for each agent node of
// pdlc-work-item-loop, in order: when a claim is blocked, the agent takes
// the node's next turn (the first requirements turn forgets the security
// section on purpose, so the demo shows a gate refusing a claim). Human
// gates have no turns: the agent waits.
func Script() map[string][]Turn {
	return map[string][]Turn{
		"brainstorming": {{Say: "writes brainstorm.md", Files: map[string]string{"brainstorm.md": Brainstorm}}},
		"requirements-definition": {
			{Say: "writes requirements.md (and forgets the security section)", Files: map[string]string{"requirements.md": RequirementsDraft}},
			{Say: "adds the security considerations the gate asked for", Files: map[string]string{"requirements.md": Requirements}},
		},
		"design": {
			{Say: "writes design.md (without answering the trust boundary)", Files: map[string]string{"design.md": DesignDraft}},
			{Say: "answers the trust boundary and the abuse case", Files: map[string]string{"design.md": Design}},
		},
		"design-critic-review": {{Say: "records the design critic review", Log: []LogSection{LogDesignCritic}}},
		"test-planning":        {{Say: "writes testing-plan.md", Files: map[string]string{"testing-plan.md": TestingPlan}}},
		"tasks-breakdown":      {{Say: "breaks the work into tasks", Files: map[string]string{"tasks.md": TasksOpen}}},
		"implementation":       {{Say: "implements and ticks every task", Files: map[string]string{"tasks.md": TasksDone}}},
		"verification":         {{Say: "records the verification results in the execution log (the testing plan is locked)", Log: []LogSection{LogVerification}}},
		"self-review":          {{Say: "self-review recorded in the execution log", Log: []LogSection{LogReviewCycles}}},
		"critic-review":        {{Say: "critic review recorded", Log: []LogSection{LogCriticReview}}},
		"security-review":      {{Say: "security review recorded", Log: []LogSection{LogSecurityReview}}},
		"evidence":             {{Say: "validation evidence recorded", Log: []LogSection{LogEvidence}}},
		"capability-docs":      {{Say: "capability docs recorded", Log: []LogSection{LogCapabilityDocs}}},
		"reviewer-briefing":    {{Say: "reviewer briefing recorded", Log: []LogSection{LogPullRequests}}},
	}
}
