package graph

import (
	"context"
	"io/fs"
	"strings"
	"time"
)

// Status is a hook's verdict.
type Status string

// The four hook statuses. Any other value returned by a hook is treated as a
// non-retriable block.
const (
	// StatusPass: this hook is satisfied; the chain continues.
	StatusPass Status = "pass"
	// StatusSkip: the hook had nothing to check. Not a verdict: the chain
	// continues, and a chain of passes and skips passes.
	StatusSkip Status = "skip"
	// StatusWait: not decidable yet (a human has not answered). The chain
	// stops and the node parks until the next inbound event.
	StatusWait Status = "wait"
	// StatusBlock: unmet. The chain stops and the messages go back to the
	// worker.
	StatusBlock Status = "block"
)

// Valid reports whether s is one of the four statuses.
func (s Status) Valid() bool {
	switch s {
	case StatusPass, StatusSkip, StatusWait, StatusBlock:
		return true
	}
	return false
}

// Boundary names which chain of a node is running.
type Boundary string

// Node boundaries.
const (
	Entry Boundary = "entry"
	Exit  Boundary = "exit"
)

// Mode says what kind of evaluation a chain runs under.
type Mode string

const (
	// ModeLive is an evaluation that may move the work item (Start, Advance,
	// Complete, Force). Hooks may perform side effects.
	ModeLive Mode = "live"
	// ModeCheck is the pure evaluation behind Status: no network, no model
	// call, no subprocess, no writes. Hooks that would run a program report
	// skip; the Artifacts handle refuses writes and Integrations is nil.
	ModeCheck Mode = "check"
)

// Severity of a message.
type Severity string

// Message severities.
const (
	SeverityError   Severity = "error"
	SeverityWarning Severity = "warning"
	SeverityInfo    Severity = "info"
)

// Message is one finding or note in a HookResult. Text is composed only of
// theloop's own vocabulary, hook names and file paths — never of comment or
// payload text, because messages are fed back to an agent.
type Message struct {
	Text     string   `json:"text"`
	Path     string   `json:"path"`
	Severity Severity `json:"severity"`
}

// String renders the message as "<text> (<path>)", or "<text>" without a path.
func (m Message) String() string {
	if m.Path == "" {
		return m.Text
	}
	return m.Text + " (" + m.Path + ")"
}

// Errorf-style constructors are deliberately absent: messages are built from
// constants and paths, which keeps untrusted text out of them by construction.

// HookResult is what a hook returns. The runtime reads only its typed
// fields; Data is for the later hooks of the chain (HookContext.Results).
type HookResult struct {
	Status Status `json:"status"`
	// Hook is the hook's registered name; the chain runner fills it in.
	Hook     string    `json:"hook"`
	Messages []Message `json:"messages"`
	// Data is free-form output for later hooks of the chain; the runtime
	// reads none of it.
	Data map[string]any `json:"data"`
	// Route is the edge this result asks for (PassWith sets it); "" routes
	// on the status. See Outcome.
	Route string `json:"outcome,omitempty"`
	// Degraded says why a side effect of a passing hook failed (a channel
	// outage): the runtime reports it as a warning and the chain continues,
	// unless the hook reference is declared blocking.
	Degraded string `json:"degraded,omitempty"`
	// Decision is a human decision this result reports, for the runtime to
	// record (with its provenance) when the chain passes.
	Decision *DecisionFact `json:"decision,omitempty"`
	// Retriable is false when trying again without a change cannot help
	// (a panic, a misdeclared graph). Constructors default it to true.
	Retriable bool `json:"retriable"`
	// FromRecord says the verdict restates an earlier live run (a recorded
	// test run) instead of evaluating afresh — what a hook that would run
	// a program reports under check. A claim on an escalated node does not
	// stay parked on such a block: the pure re-check cannot know whether a
	// fix landed, so the claim runs the chain live.
	FromRecord bool `json:"fromRecord,omitempty"`

	// recorded marks the result the runtime stands in for a human gate
	// whose recorded decision still stands: nothing new to record.
	recorded bool
}

// DecisionFact is a human decision a deciding hook reports. On a human
// gate, the last result with a Route is the gate's verdict and its
// DecisionFact (Key "") gives the verdict's provenance; a DecisionFact with
// a Key is recorded under that key (the phase selection, a goal), once.
type DecisionFact struct {
	// Key names a decision recorded in its own right ("phase-selection");
	// "" is the provenance of the gate's own verdict.
	Key string `json:"key,omitempty"`
	// By names who decided ("@login, @login"); Comment identifies the
	// deciding comment.
	By      string `json:"by,omitempty"`
	Comment string `json:"comment,omitempty"`
	// Rule is the authorization rule that let By decide (routing.authorized
	// as written, or routing.authorizedUsers), from the comments'
	// AuthorizedBy.
	Rule string `json:"rule,omitempty"`
	// FrozenGraph is the graph a phase selection froze (JSON-shaped), and
	// Via how it was selected (reply, checklist).
	FrozenGraph any    `json:"frozenGraph,omitempty"`
	Via         string `json:"via,omitempty"`
	// Surface ("work-item", "pull-request") and SessionPerPr, when the
	// decision sets them.
	Surface      string `json:"surface,omitempty"`
	SessionPerPr string `json:"sessionPerPr,omitempty"`
	// Goal is a contribution's recorded goal (JSON-shaped).
	Goal any `json:"goal,omitempty"`
	// Skips and OptIns are the nodes a selection declared skipped and
	// selected. The runtime stamps At, defaults Via to "selection" and Token
	// to the node, and honours only nodes not yet entered that may be
	// skipped (or are opt-in).
	Skips  map[string]SkipDecl       `json:"skips,omitempty"`
	OptIns map[string]OptInSelection `json:"optIns,omitempty"`
}

// Outcome is the routing outcome this result declares: Route when set,
// else the status.
func (r HookResult) Outcome() string {
	if r.Route != "" {
		return r.Route
	}
	return string(r.Status)
}

// DataString returns Data[key] when it is a string.
func (r HookResult) DataString(key string) string {
	s, _ := r.Data[key].(string)
	return s
}

// Pass returns a passing result carrying data (which may be nil).
func Pass(data map[string]any) HookResult {
	return HookResult{Status: StatusPass, Data: data, Retriable: true}
}

// PassWith returns a passing result that routes on outcome.
func PassWith(outcome string, data map[string]any) HookResult {
	return HookResult{Status: StatusPass, Data: data, Route: outcome, Retriable: true}
}

// Block returns a blocking result carrying every finding.
func Block(msgs ...Message) HookResult {
	return HookResult{Status: StatusBlock, Messages: msgs, Retriable: true}
}

// Wait returns a waiting result with an optional info note.
func Wait(note string) HookResult {
	r := HookResult{Status: StatusWait, Retriable: true}
	if note != "" {
		r.Messages = []Message{{Text: note, Severity: SeverityInfo}}
	}
	return r
}

// Skip returns a skip result with an optional info note.
func Skip(note string) HookResult {
	r := HookResult{Status: StatusSkip, Retriable: true}
	if note != "" {
		r.Messages = []Message{{Text: note, Severity: SeverityInfo}}
	}
	return r
}

// Finding returns an error-severity message about path.
func Finding(text, path string) Message {
	return Message{Text: text, Path: path, Severity: SeverityError}
}

// WorkItem is what a chain runs for.
type WorkItem struct {
	// ID is the spec-directory name, e.g. "issue-109".
	ID string `json:"id"`
	// Ref is the provider-qualified name integrations use, e.g.
	// "github:owner/repo#109". It may equal ID when none can be derived.
	Ref string `json:"ref"`
	// SpecDir is the spec directory's path relative to the repository root
	// (slash-separated), e.g. "docs/specs/issue-109". Used in messages.
	SpecDir  string   `json:"specDir"`
	Tags     []string `json:"tags"`
	RiskTier int      `json:"riskTier"`
}

// Comment is one human-authored comment carried by an inbound event.
// Body is untrusted text: hooks may classify it but never echo it into
// messages, assignments or command lines.
type Comment struct {
	ID     string `json:"id,omitempty"`
	Author string `json:"author"`
	Body   string `json:"body"`
	URL    string `json:"url,omitempty"`
	// AuthorizedBy is the rule under which the author may decide, set
	// only by the daemon that checked it against GitHub (an Event is built
	// by the daemon's ingress alone); "" leaves the hooks' own allowlist
	// to decide.
	AuthorizedBy string `json:"authorizedBy,omitempty"`
	// Verdict is a submitted pull-request review's state as a gate
	// outcome (approved, changes-requested); "" for a comment.
	Verdict string `json:"verdict,omitempty"`
}

// Event is the inbound event an exit chain is evaluated against. Only the
// daemon's ingress builds events; claims and checks carry none.
type Event struct {
	// ID identifies the delivery (e.g. X-GitHub-Delivery), for provenance.
	ID string `json:"id,omitempty"`
	// Kind is the event type, e.g. "issue_comment".
	Kind     string    `json:"kind,omitempty"`
	Comments []Comment `json:"comments"`
}

// Artifacts is a work item's spec directory as hooks see it. Names are
// slash-separated and relative to the spec directory ("requirements.md",
// "pr-loops/pr-7/graph-state.json").
type Artifacts interface {
	fs.FS
	// WriteFile replaces name atomically. Under ModeCheck it fails.
	WriteFile(name string, data []byte) error
	// AppendFile appends data to name, creating it if absent. Under
	// ModeCheck it fails.
	AppendFile(name string, data []byte) error
	// Path returns name's display path, relative to the repository root.
	Path(name string) string
}

// Integrations performs outbound operations (GitHub, Slack, Jira) on behalf of
// hooks. Arguments and results are plain JSON-shaped maps so that every
// transport of a provider answers the same way; credentials never appear in
// them.
type Integrations interface {
	Call(ctx context.Context, op Operation, args map[string]any) (map[string]any, error)
}

// Operation names an outbound operation as "<provider>.<verb>", e.g.
// "github.add-comment". Hooks declare the operations they need when they
// register; providers declare the ones they implement.
type Operation string

// Provider returns the part before the first dot.
func (o Operation) Provider() string {
	p, _, _ := strings.Cut(string(o), ".")
	return p
}

// Commands runs programs for the few hooks that must (verify-tests, a linter). argv is
// an explicit list, never a shell string; dir "" means the repository root.
// It is nil under ModeCheck: check never starts a subprocess.
type Commands interface {
	Run(ctx context.Context, argv []string, dir string) (CommandResult, error)
}

// CommandResult is what a finished program left behind. Err-free results
// with a non-zero ExitCode are ordinary failures; Run's error is for a
// program that could not start (wrap ErrCommandNotFound) or timed out.
type CommandResult struct {
	Stdout   []byte
	Stderr   []byte
	ExitCode int
}

// DeliverFunc pastes text into the bound agent session of work item
// workItem (a WorkItem.ID). It reports false when there is no live session
// to deliver into. Only the daemon injects one (Options.Deliver, handed to
// hooks as HookContext.Deliver); on the CLI path the claim envelope carries
// the assignment instead.
type DeliverFunc func(ctx context.Context, workItem, text string) (bool, error)

// SessionBinding is the agent session a work item is bound to.
type SessionBinding struct {
	ID     string `json:"id"`
	Runner string `json:"runner"`
	Alive  *bool  `json:"alive,omitempty"`
}

// HookContext is everything a hook may see. Hooks must treat it as read-only
// and must not keep it after they return: the runtime reuses it for the
// next hook of the chain.
type HookContext struct {
	WorkItem WorkItem
	// Node is the compiled node whose chain is running.
	Node     *Node
	Boundary Boundary
	Mode     Mode
	// Artifacts gives access to the work item's spec directory.
	Artifacts Artifacts
	// Session is the bound agent session, when one is recorded.
	Session *SessionBinding
	// Event is the inbound event; nil for entry chains, claims and checks.
	Event *Event
	// Results are the results of earlier hooks in this chain run.
	Results []HookResult
	// Params are this hook reference's `with:` values.
	Params Values
	// Config carries settings (authorized users, label prefix, ...) and
	// handles — environment-variable names — never secret values.
	Config Values
	// Integrations performs outbound calls; nil under ModeCheck.
	Integrations Integrations
	// Commands runs theloop's own programs; nil under ModeCheck.
	Commands Commands
	// RepoCommands runs the repository's own commands (its test command);
	// nil under ModeCheck and wherever repository code must not run (the
	// daemon). See Options.RepoCommands.
	RepoCommands Commands
	// Deliver pastes text into a work item's bound session (this chain's:
	// pass WorkItem.ID); nil on the CLI path and under ModeCheck.
	Deliver DeliverFunc
	// SkippedArtifacts holds every artifact name produced by a node that is
	// declared skipped (exit chains only; nil when there is none).
	SkippedArtifacts map[string]bool
	// SkippedNodes holds the nodes declared skipped, including opt-in nodes
	// not selected (exit chains only; nil when there is none).
	SkippedNodes map[string]bool
	// Decisions are the recorded human decisions (exit chains only; nil
	// when there is none).
	Decisions map[string]Decision
	// Escalation is what parked the node, for the graph's onEscalation
	// chain only (nil elsewhere): the node, the rendered block that
	// repeated or ran out of attempts, and the hook that raised it.
	Escalation *Parked
	// Surface is the frozen collaboration surface ("work-item",
	// "pull-request" or "").
	Surface string
	Graph   *Graph
	// Now is the evaluation time, from the runtime's clock.
	Now time.Time

	// observe reports each hook's wall time (Options.HookObserver).
	observe func(HookTiming)
}

// HookTiming is one hook run, for Options.HookObserver (metrics).
type HookTiming struct {
	Node     string
	Hook     string
	Boundary Boundary
	Mode     Mode
	Status   Status
	Duration time.Duration
}

// Hook is a registered unit of work. It must honour ctx's deadline when it
// blocks, must not retain hc after returning, and must not panic (a panic is
// recovered and becomes a block).
type Hook func(ctx context.Context, hc *HookContext) HookResult
