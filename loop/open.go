package loop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/hooks"
	"github.com/theloop-dev/theloop/ops"
	"github.com/theloop-dev/theloop/workitem"
)

// Options tailor Open. The zero value opens the work-item loop for CLI use:
// no integrations, no delivery, wall clock, no event log.
type Options struct {
	// Graph runs this compiled graph instead of a shipped loop (for graph
	// authors, and for conformance against the-loop's own graphs); compile
	// it against ShippedHooks() with package graph/graphfile. Reading graph
	// files is not this package's job, so that the Stop hook links no YAML
	// parser.
	Graph *graph.Graph
	// Loop names a shipped loop. Empty: the loop recorded in WorkItem's
	// state (only the contribution and ad-hoc loops are honoured from that
	// agent-writable field), else the work-item loop; PR > 0 always selects
	// the PR loop.
	Loop string
	// WorkItem is the id whose recorded loop Open consults when Loop is
	// empty.
	WorkItem string
	// PR and PRRepo address a pull request's inner loop.
	PR     int
	PRRepo string

	// Operator settings, from the CLI config.
	AuthorizedUsers []string
	ExecuteKeyword  string
	SessionPerPr    string
	// SpecDir overrides the repository's workflow.specDir.
	SpecDir string

	// The world.
	Integrations graph.Integrations
	Commands     graph.Commands
	// RepoCommands runs the repository's own commands (its
	// verification.testCommand). Set it only where running the
	// repository's code is allowed — the CLI in the agent's sandbox
	// (OpenLive sets it); the daemon never does.
	RepoCommands graph.Commands
	Deliver      graph.DeliverFunc
	Sink         graph.Sink
	Clock        graph.Clock
	LockTimeout  time.Duration
	// DecisionSigner signs the gate decisions this runtime records when a
	// human gate resolves from an inbound event's comments (the daemon's
	// path). The daemon passes the signer of its key:
	//
	//	signer, err := loop.LoadSigningKey(stateRoot) // <state root>/keys/decision-signing.key
	//	rt, err := loop.Open(repo, loop.Options{...,
	//		DecisionSigner:   signer,
	//		DecisionVerifier: signer.Verifier(), // the daemon trusts only what it signed
	//	})
	//
	// The event's graph.Comment ID and URL become the decision's comment
	// provenance. Nil records decisions unsigned, which every verifier with
	// a trust anchor refuses.
	DecisionSigner graph.DecisionSigner
	// DecisionVerifier decides which recorded decisions count (build it
	// with LoadVerifier from the trust anchor). Nil honours every recorded
	// decision, as the-loop does — print UnverifiedWarning once per run.
	DecisionVerifier graph.DecisionVerifier
	// Warn receives non-fatal findings (an ignored repository graph, a
	// harness-config key of the wrong type, a workflow.phases list that
	// differs from the graph — R9.3). Nil discards them.
	Warn func(string)
	// HookObserver is told each hook's wall time (graph.Options; metrics).
	HookObserver func(graph.HookTiming)
	// Scrub, when set, cleans every value written into graph-state.json
	// of credentials (hook messages quote a test run's output, a force's
	// reason is typed by a person): CredentialScrub, or loopd's scrubber.
	Scrub func(any) any
}

// Repo is a repository checkout as theloop reads it.
type Repo struct {
	Root          string
	Harness       HarnessConfig
	Collaborators Collaborators
	SpecDir       string
	Warnings      []string
}

// OpenRepo reads a checkout's configuration without building a runtime.
// It never writes and never runs anything from the repository.
func OpenRepo(root, specDirOverride string) (*Repo, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrRepoNotFound, root, err)
	}
	if st, err := os.Stat(abs); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("%w: %s is not a directory; pass the repository root with --repo", ErrRepoNotFound, root)
	}
	r := &Repo{Root: abs}
	h, warns, err := LoadHarnessConfig(abs)
	if err != nil {
		return nil, err
	}
	r.Harness = h
	r.Warnings = append(r.Warnings, warns...)
	r.Warnings = append(r.Warnings, RepoGraphWarnings(abs)...)
	c, err := LoadCollaborators(abs)
	if err != nil {
		r.Warnings = append(r.Warnings, err.Error())
	}
	r.Collaborators = c
	r.SpecDir = h.SpecDir
	if specDirOverride != "" {
		if err := ValidateSpecDir("routing.graph.specDir", specDirOverride); err != nil {
			return nil, err
		}
		r.SpecDir = specDirOverride
	}
	return r, nil
}

// Open turns a repository checkout into a ready runtime for one loop: it
// reads the harness config (defaults when absent), compiles the loop, and
// wires the filesystem store, the spec-directory artifacts and the hooks'
// configuration. It does no network I/O and starts no process.
func Open(repoRoot string, opts Options) (*graph.Runtime, error) {
	r, err := OpenRepo(repoRoot, opts.SpecDir)
	if err != nil {
		return nil, err
	}
	return r.Runtime(opts)
}

// Runtime builds the runtime of one loop over this repository.
func (r *Repo) Runtime(opts Options) (*graph.Runtime, error) {
	for _, w := range r.Warnings {
		if opts.Warn != nil {
			opts.Warn(w)
		}
	}
	g, err := r.selectGraph(opts)
	if err != nil {
		return nil, err
	}
	if opts.Warn != nil && PhaseGraph(g) {
		for _, w := range r.Harness.PhaseWarnings(g) {
			opts.Warn(w)
		}
	}
	origin := r.Harness.OriginRepo()
	storeOpts := []StoreOption{}
	if opts.Clock != nil {
		storeOpts = append(storeOpts, WithStoreClock(opts.Clock))
	}
	if opts.Scrub != nil {
		storeOpts = append(storeOpts, WithStoreScrub(opts.Scrub))
	}
	items := &fileItems{repoRoot: r.Root, specRoot: r.SpecDir, originRepo: origin, jiraProject: r.Harness.JiraProject, scrub: opts.Scrub}
	cfg := r.hookConfig(opts)
	if opts.PR > 0 {
		sub, err := PRLoopSubPath(opts.PRRepo, origin, opts.PR)
		if err != nil {
			return nil, err
		}
		storeOpts = append(storeOpts, WithStateSubPath(sub))
		prRepo := opts.PRRepo
		if prRepo == "" {
			prRepo = origin
		}
		if prRepo != "" {
			items.refOverride = fmt.Sprintf("github:%s#%d", prRepo, opts.PR)
		}
		cfg["assignmentPr"] = opts.PR
		if opts.PRRepo != "" && !strings.EqualFold(opts.PRRepo, origin) {
			cfg["assignmentPrRepo"] = opts.PRRepo
		}
	}
	store := NewStore(r.Root, r.SpecDir, storeOpts...)
	// A typed nil in the interface would be called; treat it as none.
	if v, ok := opts.DecisionVerifier.(*Verifier); ok && v == nil {
		opts.DecisionVerifier = nil
	}
	if sg, ok := opts.DecisionSigner.(*Signer); ok && sg == nil {
		opts.DecisionSigner = nil
	}
	// In a loopd-managed session the runtime's transitions are the claims
	// the session records for loopd (docs/decisions.md §23).
	if rec, ok := opts.Integrations.(*Recorder); ok && rec != nil && !rec.questions {
		opts.Sink = claimSink{next: opts.Sink, rec: rec}
	}
	return graph.New(g, graph.Options{
		Store:        store,
		Items:        items,
		Sink:         opts.Sink,
		Clock:        opts.Clock,
		Config:       cfg,
		Integrations: opts.Integrations,
		Commands:     opts.Commands,
		RepoCommands: opts.RepoCommands,
		Deliver:      opts.Deliver,
		Auditor:      &auditor{root: r.Root, integrations: opts.Integrations, clock: opts.Clock, scrub: opts.Scrub},
		LockTimeout:  opts.LockTimeout,
		Signer:       opts.DecisionSigner,
		Verifier:     opts.DecisionVerifier,
		HookObserver: opts.HookObserver,
	})
}

func (r *Repo) selectGraph(opts Options) (*graph.Graph, error) {
	if opts.Graph != nil {
		return opts.Graph, nil
	}
	name := opts.Loop
	switch {
	case opts.PR > 0:
		name = PRLoop
	case name == "" && opts.WorkItem != "":
		name = ResolveOuterLoop(r.recordedLoop(opts.WorkItem))
	case name == "":
		name = WorkItemLoop
	}
	return ShippedGraph(name)
}

// recordedLoop peeks at the loop a work item's state records ("" when none).
func (r *Repo) recordedLoop(id string) string {
	if ValidateWorkItemID(id) != nil {
		return ""
	}
	path, err := NewStore(r.Root, r.SpecDir).StatePath(id)
	if err != nil {
		return ""
	}
	// An oversized file names no loop here; Load refuses it the same way
	// and recompute reconstructs the state.
	data, err := readCapped(path, MaxStateBytes)
	if err != nil {
		return ""
	}
	// Only the loop name is needed here; the full state is parsed once,
	// by the verb that follows.
	var head struct {
		Loop string `json:"loop"`
	}
	if json.Unmarshal(data, &head) != nil {
		return ""
	}
	return head.Loop
}

// hookConfig is the configuration hooks read (handles, never secrets).
func (r *Repo) hookConfig(opts Options) graph.Values {
	events := map[string]any{}
	for ev, roles := range r.Harness.Notifications.Events {
		rs := make([]any, len(roles))
		for i, x := range roles {
			rs[i] = x
		}
		events[ev] = rs
	}
	collab := make([]any, 0, len(r.Collaborators))
	for _, c := range r.Collaborators {
		roles := make([]any, len(c.Roles))
		for i, x := range c.Roles {
			roles[i] = x
		}
		collab = append(collab, map[string]any{"login": c.Login, "roles": roles, "slack": c.Slack})
	}
	users := make([]any, len(opts.AuthorizedUsers))
	for i, u := range opts.AuthorizedUsers {
		users[i] = u
	}
	cfg := graph.Values{
		"authorizedUsers":  users,
		"phaseLabelPrefix": r.Harness.PhaseLabelPrefix,
		"notifications":    map[string]any{"enabled": r.Harness.Notifications.Enabled, "events": events},
		"collaborators":    collab,
		"repoInitialized":  r.Harness.Present,
		"originRepo":       r.Harness.OriginRepo(),
	}
	if len(r.Harness.JiraTransitions) > 0 {
		tr := map[string]any{}
		for phase, t := range r.Harness.JiraTransitions {
			tr[phase] = t
		}
		cfg["jiraTransitions"] = tr
	}
	if len(r.Harness.TestCommand) > 0 {
		cfg["testCommand"] = anyStrings(r.Harness.TestCommand)
	}
	if len(r.Harness.MarkdownLinter) > 0 {
		cfg["markdownLinter"] = anyStrings(r.Harness.MarkdownLinter)
	}
	if r.Harness.TestTimeout > 0 {
		cfg["testTimeout"] = r.Harness.TestTimeout.String()
	}
	if opts.ExecuteKeyword != "" {
		cfg["executeKeyword"] = opts.ExecuteKeyword
	}
	if opts.SessionPerPr != "" {
		cfg["sessionPerPr"] = opts.SessionPerPr
	}
	return cfg
}

// anyStrings is a []string as the []any a graph.Values list holds.
func anyStrings(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// auditor leaves the human-visible trail of force and skip declarations:
// an execution-log entry (when the work item keeps one) and a marked comment
// on the ticket. Both are best-effort; failures come back as warnings.
type auditor struct {
	root         string
	integrations graph.Integrations
	clock        graph.Clock
	// scrub cleans the entry and the comment: a reason is typed by a
	// person, a warning may quote anything (Options.Scrub).
	scrub func(any) any
}

func (a *auditor) now() time.Time {
	if a.clock != nil {
		return a.clock.Now()
	}
	return time.Now()
}

func (a *auditor) comment(ctx context.Context, wi graph.WorkItem, body string) error {
	if a.integrations == nil {
		return nil
	}
	if a.scrub != nil {
		if s, ok := a.scrub(body).(string); ok {
			body = s
		}
	}
	op, args := ops.GitHubAddComment, map[string]any{"ref": wi.Ref, "body": hooks.Mark(body)}
	if key, err := workitem.ParseJiraKey(wi.Ref); err == nil && workitem.IsJiraRef(wi.Ref) {
		op, args = ops.JiraAddComment, map[string]any{"issue": key, "body": hooks.Mark(body)}
	}
	_, err := a.integrations.Call(ctx, op, args)
	if errors.Is(err, graph.ErrUnsupportedOperation) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("could not post the audit comment: %w", err)
	}
	return nil
}

// log appends an entry to the work item's execution log, when it keeps one.
func (a *auditor) log(wi graph.WorkItem, entry string) error {
	arts := NewFileArtifacts(filepath.Join(a.root, filepath.FromSlash(wi.SpecDir)), wi.SpecDir).Scrubbed(a.scrub)
	if _, err := arts.Stat(hooks.ExecutionLog); err != nil {
		return nil
	}
	if err := arts.AppendFile(hooks.ExecutionLog, []byte(entry)); err != nil {
		return fmt.Errorf("could not append to %s: %w", arts.Path(hooks.ExecutionLog), err)
	}
	return nil
}

// Forced implements graph.Auditor.
func (a *auditor) Forced(ctx context.Context, wi graph.WorkItem, rec graph.ForceRecord) error {
	var b strings.Builder
	fmt.Fprintf(&b, "🤖 _the-loop_ — **forced transition**\n\n`%s` → `%s` by %s\n\n**Reason:** %s", rec.From, rec.To, rec.Actor, rec.Reason)
	for _, w := range rec.Warnings {
		b.WriteString("\n- ⚠️ " + w)
	}
	b.WriteString("\n\nOnly the pointer moved: no gate was passed. `loopctl check --recompute` still reports the bypassed gate as unmet.")
	entry := fmt.Sprintf("\n### %s — forced %s → %s\n\n- **By:** %s\n- **Reason:** %s\n", a.now().Format("2006-01-02"), rec.From, rec.To, rec.Actor, rec.Reason)
	for _, w := range rec.Warnings {
		entry += "- **Warning:** " + w + "\n"
	}
	return errors.Join(a.log(wi, entry), a.comment(ctx, wi, b.String()))
}

// SkipsDeclared implements graph.Auditor.
func (a *auditor) SkipsDeclared(ctx context.Context, wi graph.WorkItem, nodes []string, by, reason string) error {
	q := make([]string, len(nodes))
	for i, n := range nodes {
		q[i] = "`" + n + "`"
	}
	body := fmt.Sprintf("🤖 _the-loop_ — **declared skips**\n\n%s declared skipped by %s\n\n**Reason:** %s\n\nThese are declarations, not verdicts: `loopctl check` reports them as skipped, never as passed.", strings.Join(q, ", "), by, reason)
	entry := fmt.Sprintf("\n### %s — declared skips\n\n- **Nodes:** %s\n- **By:** %s\n- **Reason:** %s\n", a.now().Format("2006-01-02"), strings.Join(nodes, ", "), by, reason)
	return errors.Join(a.log(wi, entry), a.comment(ctx, wi, body))
}
