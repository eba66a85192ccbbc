package hooks

import (
	"time"

	"github.com/theloop-dev/theloop/graph"
)

// Specs returns every hook this package ships, with the integration
// operations each may call.
func Specs() []graph.HookSpec {
	gh := func(ops ...graph.Operation) []graph.Operation { return ops }
	return []graph.HookSpec{
		{Name: "validate-artifacts", Run: validateArtifacts, Summary: "the node's artifacts exist (one of each alternative), carry the required sections, lock and checkmarks"},
		{Name: "enforces-boundaries-from", Run: enforcesBoundariesFrom, Summary: "every trust boundary / abuse case named upstream is answered in this node's artifact"},
		{Name: "lint-artifacts", Run: lintArtifacts, Summary: "mermaid blocks parse, code fences close, optional line length and external linter"},
		{Name: "verify-tests", Run: verifyTests, Timeout: DefaultTestTimeout + time.Minute, Summary: "the node's declared test command passes (skipped under check)"},
		{Name: "await-inner-loops", Run: awaitInnerLoops, Summary: "every pull request's pdlc-pr-loop is complete"},
		{Name: "classify-feedback", Run: classifyFeedback, Summary: "an authorized reviewer approved, approved with comments, or requested changes"},
		{Name: "lock-artifacts", Run: lockArtifacts, Summary: "writes status: approved and approvedBy into the approved artifact and re-reads it"},
		{Name: "record-feedback", Run: recordFeedback, Summary: "appends the review to the artifact's ## Review comments"},
		{Name: "record-decision", Run: recordDecision, Summary: "appends the gate's decision to execution-log.md"},
		{Name: "post-phase-selection", Run: postPhaseSelection, Needs: gh(OpListComments, OpAddComment), Summary: "posts the phase checklist once"},
		{Name: "classify-phase-selection", Run: classifyPhaseSelection, Needs: gh(OpListComments, OpAddComment), Summary: "freezes the phases an authorized reply chose"},
		{Name: "post-goal-request", Run: postGoalRequest, Needs: gh(OpListComments, OpAddComment), Summary: "asks once for the contribution's goal"},
		{Name: "classify-goal", Run: classifyGoal, Needs: gh(OpListComments, OpAddComment), Summary: "records the contribution's goal and success criteria"},
		{Name: "classify-adhoc-reply", Run: classifyAdhocReply, Summary: "the requester declared the ad-hoc work done, or asked for more"},
		{Name: "set-phase-label", Run: setPhaseLabel, Needs: gh(OpSetLabels), Summary: "moves the ticket's loop: label to the node's phase"},
		{Name: "request-review", Run: requestReview, Needs: gh(OpAddComment), Summary: "asks for review on the ticket"},
		{Name: "notify", Run: notify, Needs: gh(OpSlackPost), Summary: "tells the roles subscribed to an event (collaborators.yaml)"},
		{Name: "publish-artifact", Run: publishArtifact, Needs: gh(OpAddComment), Summary: "posts an artifact to the thread when the repository does not carry it"},
		{Name: "log-entry", Run: logEntry, Summary: "appends a checkpoint to execution-log.md"},
		{Name: "deliver-assignment", Run: deliverAssignment, Summary: "pastes the node's assignment into the agent session (daemon only)"},
		{Name: "mcp-call", Run: mcpCall, Timeout: 6 * time.Minute, Summary: "delegates an MCP tool call to the harness (not used by the shipped graphs)"},
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

func init() { Register(graph.DefaultRegistry()) }
