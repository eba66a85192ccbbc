package hooks

import (
	"time"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/ops"
)

// Specs returns every hook this package ships, with the integration
// operations each may call.
func Specs() []graph.HookSpec {
	gh := func(ops ...graph.Operation) []graph.Operation { return ops }
	return []graph.HookSpec{
		{Name: "validate-artifacts", Run: validateArtifacts, Summary: "the node's artifacts exist (one of each alternative), carry the required sections, lock and checkmarks", Params: []graph.Param{
			{Name: "validates", Type: graph.ParamStrings, Summary: "artifacts of earlier nodes to check as well (a|b for alternatives)"},
			{Name: "onlyWhenSkipped", Type: graph.ParamStrings, Summary: "run only when these artifacts were declared skipped and are absent"},
			{Name: "locked", Type: graph.ParamBool, Summary: "the artifacts must carry status: approved"},
			{Name: "frontMatter", Type: graph.ParamMap, Summary: "front-matter keys and the values they must hold"},
			{Name: "sections", Type: graph.ParamStrings, Summary: "## headings each artifact must contain"},
			{Name: "checkmarks", Type: graph.ParamString, Summary: "complete: no checkbox in the artifact may be unticked; any other value names the ## heading under which every checkbox must be ticked"},
			{Name: "reviewed", Type: graph.ParamBool, Summary: "an artifact locked at a gate (status: approved with its decision:) must have a non-empty ## Review comments (R5.2)"},
		}},
		{Name: "enforces-boundaries-from", Run: enforcesBoundariesFrom, Summary: "every trust boundary / abuse case named upstream is answered in this node's artifact", Params: []graph.Param{
			{Name: "upstream", Type: graph.ParamStrings, Summary: "the upstream artifacts naming trust boundaries / abuse cases"},
			{Name: "markers", Type: graph.ParamStrings, Summary: "the headings or labels that introduce each named item"},
		}},
		{Name: "lint-artifacts", Run: lintArtifacts, Summary: "mermaid blocks parse (flowchart and sequence diagrams by their grammar, other types by keyword), code fences close, optional line length and the graph's markdown linter", Params: []graph.Param{
			{Name: "diagrams", Type: graph.ParamBool, Summary: "parse mermaid blocks (default true)"},
			{Name: "structure", Type: graph.ParamBool, Summary: "check fences and headings (default true)"},
			{Name: "maxLineLength", Type: graph.ParamInt, Summary: "longest line allowed outside code (0: no limit)"},
			{Name: "linter", Type: graph.ParamStrings, Summary: "a markdown linter run over the node's artifacts through the command runner: an argv list or a string split into words (no shell); not run under check"},
		}},
		{Name: "verify-tests", Run: verifyTests, Timeout: MaxTestTimeout + time.Minute, Summary: "the repository's test command passes: run by loopctl in the agent's sandbox and recorded in test-runs.json; check and loopd read the record", Params: []graph.Param{
			{Name: "command", Type: graph.ParamStrings, Summary: "the test command (default: the harness config's verification.testCommand): an argv list or a string split into words (no shell)"},
			{Name: "timeoutSeconds", Type: graph.ParamDuration, Summary: "how long the command may run"},
		}},
		{Name: "await-inner-loops", Run: awaitInnerLoops, Summary: "every pull request's pdlc-pr-loop is complete", Params: graph.NoParams},
		{Name: "classify-feedback", Run: classifyFeedback, Summary: "an authorized reviewer approved, approved with comments, or requested changes", Params: graph.NoParams},
		{Name: "lock-artifacts", Run: lockArtifacts, Summary: "writes status: approved and approvedBy into the approved artifact and re-reads it", Params: []graph.Param{
			{Name: "artifacts", Type: graph.ParamStrings, Summary: "the artifacts to lock"},
			{Name: "artifact", Type: graph.ParamStrings, Summary: "the artifact to lock (alias of artifacts)"},
		}},
		{Name: "record-feedback", Run: recordFeedback, Summary: "appends the review to the artifact's ## Review comments", Params: []graph.Param{{Name: "into", Type: graph.ParamString, Summary: "the artifact (a|b alternatives) whose ## Review comments receives the review"}}},
		{Name: "record-decision", Run: recordDecision, Summary: "appends the gate's decision to execution-log.md", Params: []graph.Param{{Name: "into", Type: graph.ParamString, Summary: "the log to append to (default execution-log.md)"}}},
		{Name: "post-phase-selection", Run: postPhaseSelection, Needs: gh(ops.GitHubListComments, ops.GitHubAddComment), Summary: "posts the phase checklist once", Params: graph.NoParams},
		{Name: "classify-phase-selection", Run: classifyPhaseSelection, Needs: gh(ops.GitHubListComments, ops.GitHubAddComment), Summary: "freezes the phases an authorized reply chose", Params: graph.NoParams},
		{Name: "post-goal-request", Run: postGoalRequest, Needs: gh(ops.GitHubListComments, ops.GitHubAddComment), Summary: "asks once for the contribution's goal", Params: graph.NoParams},
		{Name: "classify-goal", Run: classifyGoal, Needs: gh(ops.GitHubListComments, ops.GitHubAddComment), Summary: "records the contribution's goal and success criteria", Params: graph.NoParams},
		{Name: "classify-adhoc-reply", Run: classifyAdhocReply, Summary: "the requester declared the ad-hoc work done, or asked for more", Params: graph.NoParams},
		{Name: "set-phase-label", Run: setPhaseLabel, Needs: gh(ops.GitHubSetLabels), Summary: "moves the ticket's loop: label to the node's phase", Params: graph.NoParams},
		{Name: "request-review", Run: requestReview, Needs: gh(ops.GitHubAddComment), Summary: "asks for review on the ticket", Params: graph.NoParams},
		{Name: "escalate-on-ticket", Run: escalateOnTicket, Needs: gh(ops.GitHubAddComment, ops.GitHubSetLabels), Summary: "tells the ticket that a node escalated: a marked comment with the block and what a human can do, and the label <prefix>escalated", Params: []graph.Param{{Name: "label", Type: graph.ParamString, Summary: "the label to add (default the phase label prefix + escalated)"}}},
		{Name: "notify", Run: notify, Needs: gh(ops.SlackPostMessage), Summary: "tells the roles subscribed to an event (collaborators.yaml)", Params: []graph.Param{{Name: "event", Type: graph.ParamString, Summary: "the collaborators.yaml event to notify (default phase-approval-pending)"}}},
		{Name: "publish-artifact", Run: publishArtifact, Needs: gh(ops.GitHubAddComment), Summary: "posts an artifact to the thread when the repository does not carry it", Params: []graph.Param{{Name: "artifact", Type: graph.ParamString, Summary: "the artifact to post"}}},
		{Name: "log-entry", Run: logEntry, Summary: "appends a checkpoint to execution-log.md", Params: graph.NoParams},
		{Name: "deliver-assignment", Run: deliverAssignment, Summary: "pastes the node's assignment into the agent session (daemon only)", Params: graph.NoParams},
		{Name: "mcp-call", Run: mcpCall, Timeout: 6 * time.Minute, Summary: "delegates an MCP tool call to the harness (not used by the shipped graphs)", Params: []graph.Param{
			{Name: "tool", Type: graph.ParamString, Required: true, Summary: "the MCP tool to call"},
			{Name: "arguments", Type: graph.ParamAny, Summary: "the tool's arguments"},
			{Name: "harness", Type: graph.ParamString, Summary: "the harness that runs the call (default claude)"},
			{Name: "timeoutSeconds", Type: graph.ParamDuration, Summary: "how long the call may run (default 300)"},
		}},
	}
}

// Register adds every shipped hook to reg.
func Register(reg *graph.Registry) {
	for _, s := range Specs() {
		reg.Register(s)
	}
}

// NewRegistry returns a registry holding exactly the shipped hooks.
func NewRegistry() *graph.Registry {
	reg := graph.NewRegistry()
	Register(reg)
	return reg
}

// The shipped hooks join graph.DefaultRegistry() when it is first used, not
// in this package's init: loopctl and loop-gate link this package but use
// their own registry (loop's ShippedHooks), and every process start would
// otherwise build the specs for nothing.
func init() { graph.RegisterDefaultsLazily(Register) }
