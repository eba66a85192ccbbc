package graph

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// DefaultLockTimeout is how long a verb waits for a work item's state lock.
const DefaultLockTimeout = 2 * time.Second

// Options are a Runtime's dependencies. Store and Items are required.
type Options struct {
	// Store persists graph-state.json.
	Store Store
	// Items resolves work item ids to their artifacts.
	Items Items
	// Sink receives events; nil discards them.
	Sink Sink
	// Clock tells the time; nil is the wall clock.
	Clock Clock
	// Config is handed to hooks (authorizedUsers, phaseLabelPrefix, ...).
	// It carries handles, never secret values.
	Config Values
	// Integrations performs outbound calls for live chains; nil makes
	// outbound hooks record a degradation.
	Integrations Integrations
	// Commands runs programs for hooks that must (verify-tests); nil makes
	// such hooks block in live mode. Never used under check.
	Commands Commands
	// Deliver pastes a node's assignment into the work item's session. Only
	// the daemon sets it; on the CLI path the claim envelope carries the
	// assignment.
	Deliver func(ctx context.Context, workItem, text string) (bool, error)
	// Auditor leaves the execution-log entry and ticket comment for force
	// and skip declarations; nil leaves only state and event log.
	Auditor Auditor
	// LockTimeout bounds waiting for the state lock (DefaultLockTimeout).
	LockTimeout time.Duration
	// Signer signs the decisions recorded when a human gate resolves from
	// an inbound event (ARCHITECTURE decision 16); nil records them
	// unsigned. The daemon sets it.
	Signer DecisionSigner
	// Verifier decides whether a recorded decision counts. nil honours
	// every recorded decision as the-loop does (unverified: callers should
	// say so). With a verifier, a decision it refuses does not pass its
	// gate: Status reports the gate as a block naming why, a claim blocks,
	// and an inbound event replaces the refused record with a fresh one.
	Verifier DecisionVerifier
	// HookObserver, when set, is told each hook's wall time and status
	// (called on the chain's goroutine; it must not block).
	HookObserver func(HookTiming)
}

// Runtime walks work items through one compiled graph. It is safe for
// concurrent use; verbs that change state serialise per work item through
// the Store's lock.
//
// A Runtime owns no goroutine and holds no resource beyond its Options, so
// it needs no Close: drop it when done. Hooks run on a small process-wide
// worker pool (at most a few parked goroutines, each exiting after a while
// without work); a hook that overruns its deadline is abandoned and its
// goroutine ends when the hook returns.
type Runtime struct {
	g    *Graph
	opts Options
	sink Sink
	clk  Clock
}

// New returns a Runtime for g.
func New(g *Graph, opts Options) (*Runtime, error) {
	if g == nil {
		return nil, errors.New("graph: New needs a compiled graph")
	}
	if opts.Store == nil {
		return nil, errors.New("graph: New needs a Store (graphtest.NewStore for an in-memory one)")
	}
	if opts.Items == nil {
		return nil, errors.New("graph: New needs an Items resolver")
	}
	r := &Runtime{g: g, opts: opts, sink: opts.Sink, clk: opts.Clock}
	if r.sink == nil {
		r.sink = discardSink{}
	}
	if r.clk == nil {
		r.clk = SystemClock{}
	}
	if r.opts.LockTimeout <= 0 {
		r.opts.LockTimeout = DefaultLockTimeout
	}
	if r.opts.Config == nil {
		r.opts.Config = Values{}
	}
	return r, nil
}

// Graph returns the runtime's graph.
func (r *Runtime) Graph() *Graph { return r.g }

// NodeReport is one node's verdict in a Report.
type NodeReport struct {
	Node     string   `json:"node"`
	Status   string   `json:"status"`
	Outcome  string   `json:"outcome"`
	Messages []string `json:"messages"`
	Forced   bool     `json:"forced"`
	Attempts int      `json:"attempts"`
}

// Report is what Status returns and `loopctl check --format json` prints.
type Report struct {
	WorkItem    string       `json:"workItem"`
	CurrentNode string       `json:"currentNode"`
	OK          bool         `json:"ok"`
	Parked      *Parked      `json:"parked"`
	Nodes       []NodeReport `json:"nodes"`
	// Warnings are notes about the evaluation itself (a reconstructed state).
	Warnings []string `json:"warnings,omitempty"`
}

// Node returns the report of node id.
func (rep *Report) Node(id string) (NodeReport, bool) {
	for _, n := range rep.Nodes {
		if n.Node == id {
			return n, true
		}
	}
	return NodeReport{}, false
}

// Step statuses beyond the hook statuses.
const (
	StepEscalated = "escalated"
	StepRefused   = "refused"
	StepNoop      = "noop"
	StepBusy      = "busy"
)

// StepReport is the result of Start and Advance.
type StepReport struct {
	// Node is the node that was evaluated (or entered, for Start).
	Node string `json:"node"`
	// Status is pass, wait, block or escalated.
	Status   string   `json:"status"`
	Outcome  string   `json:"outcome"`
	Messages []string `json:"messages"`
	Forced   bool     `json:"forced"`
	Attempts int      `json:"attempts"`
	// Moved reports whether the pointer moved; CurrentNode is where it is
	// now.
	Moved       bool   `json:"moved"`
	CurrentNode string `json:"currentNode"`
}

// Claim is the envelope Complete returns and `loopctl graph complete`
// prints.
type Claim struct {
	Node        string   `json:"node"`
	Status      string   `json:"status"`
	Outcome     string   `json:"outcome"`
	Moved       bool     `json:"moved"`
	CurrentNode string   `json:"currentNode"`
	Messages    []string `json:"messages"`
	// Reason explains a refusal: not-started, not-current, already-past,
	// busy.
	Reason string `json:"reason"`
}

// ForceResult is what Force returns.
type ForceResult struct {
	WorkItem string   `json:"workItem"`
	FromNode string   `json:"fromNode"`
	ToNode   string   `json:"toNode"`
	Reason   string   `json:"reason"`
	Warnings []string `json:"warnings"`
	// Entry is the outcome of the target's entry chain.
	Messages []string `json:"messages"`
}

// SkipRejection is a token DeclareSkips refused, and why.
type SkipRejection struct {
	Token string `json:"token"`
	Why   string `json:"why"`
}

// SkipResult is what DeclareSkips returns.
type SkipResult struct {
	WorkItem string          `json:"workItem"`
	Declared []string        `json:"declared"`
	Rejected []SkipRejection `json:"rejected"`
	Reason   string          `json:"reason"`
	Warnings []string        `json:"warnings"`
}

// session is one verb's view of a work item.
type session struct {
	wi   WorkItem
	arts Artifacts
	st   *State
	warn []string
	// now is the verb's one reading of the clock: every timestamp and event
	// of a transition carries the same instant.
	now time.Time

	// lost lists the graph's artifacts found beside a missing state.
	lost []string

	// ro is the read-only, memoising view of arts used by check chains.
	ro *readOnly

	// verdicts memoises the verifier's answers for this verb.
	verdicts map[string]error
	// emitted is how many of st.Unlogged (a prefix) have been emitted
	// since they were saved; the next save drops them from the state.
	emitted int
	// saveFailed is set when a save of this verb failed.
	saveFailed bool

	// Exit-chain inputs derived from st, computed once per skip set.
	exitFor      *skipInfo
	decisions    map[string]Decision
	skipped      map[string]bool
	skippedNodes map[string]bool
}

func (r *Runtime) now() time.Time { return r.clk.Now() }

func (r *Runtime) emit(s *session, name string, level Level, fields ...Field) {
	if _, off := r.sink.(discardSink); off {
		return
	}
	ref := s.wi.Ref
	if ref == "" {
		ref = s.wi.ID
	}
	r.sink.Emit(LogEvent{Time: s.now, Name: name, Level: level, Fields: append([]Field{{"work_item", ref}}, fields...)})
}

// open resolves the work item and loads its state. Missing state is a fresh
// state; unparseable state is reconstructed by recompute with a warning
// (the Store preserves the bad bytes when it next saves).
//
// A missing state beside the graph's artifacts is work whose state was lost
// (R8.3): with reconstructMissing (Status, the report) the state is
// reconstructed by recompute with a warning; the live verbs keep treating it
// as not started, so Start still begins the walk and a claim on an item
// that never started is still refused.
func (r *Runtime) open(ctx context.Context, id string, missing missingPolicy) (*session, error) {
	wi, arts, err := r.opts.Items.Resolve(ctx, id)
	if err != nil {
		return nil, err
	}
	s := &session{wi: wi, arts: arts, now: r.now()}
	st, err := r.opts.Store.Load(ctx, id)
	switch {
	case err == nil:
		s.st = st
	case errors.Is(err, ErrNoState):
		s.st = NewState(id)
		if missing == missingFresh {
			break
		}
		if s.lost = r.producedPresent(arts); len(s.lost) > 0 && missing == missingReconstruct {
			// R8.3: artifacts without a state file are work in progress
			// whose state was lost (deleted, never committed), not an item
			// that has not started.
			r.reconstruct(ctx, s)
			r.warnLost(s, s.st.CurrentNode)
		}
	case errors.Is(err, ErrCorruptState):
		s.st = NewState(id)
		r.reconstruct(ctx, s)
		s.warn = append(s.warn, fmt.Sprintf("graph-state.json could not be parsed; the state was reconstructed from the artifacts (current node: %s) and the unparseable file is preserved beside it", s.st.CurrentNode))
		r.emit(s, "graph.state_reconstructed", LevelWarning, Field{"node", s.st.CurrentNode}, Field{"error", err.Error()})
	default:
		return nil, err
	}
	if s.st.WorkItem == "" {
		s.st.WorkItem = id
	}
	return s, nil
}

// missingPolicy says what open does with a missing graph-state.json.
type missingPolicy int

const (
	// missingFresh: a fresh state (the live verbs: not started).
	missingFresh missingPolicy = iota
	// missingReconstruct: beside the graph's artifacts, reconstruct by
	// recompute and warn (R8.3).
	missingReconstruct
	// missingNote: only note the artifacts found (s.lost); the caller
	// recomputes anyway and warns.
	missingNote
)

// warnLost is R8.3's warning and event for a reconstructed missing state.
func (r *Runtime) warnLost(s *session, node string) {
	s.warn = append(s.warn, fmt.Sprintf("graph-state.json is missing although the spec directory holds %s; the state was reconstructed from the artifacts (current node: %s)", strings.Join(s.lost, ", "), node))
	r.emit(s, "graph.state_reconstructed", LevelWarning, Field{"node", node}, Field{"error", "graph-state.json is missing"})
}

// reconstruct rebuilds s.st (fresh) by recompute: the pointer goes where
// the artifacts put it.
func (r *Runtime) reconstruct(ctx context.Context, s *session) {
	rep := r.evaluateAll(ctx, s, true)
	if rep.CurrentNode != "" {
		s.st.Enter(rep.CurrentNode, s.now)
	}
	s.st.Loop = r.g.Name
}

// producedPresent lists, in declaration order, the artifacts the graph's
// nodes produce that exist in arts.
func (r *Runtime) producedPresent(arts Artifacts) []string {
	if arts == nil {
		return nil
	}
	var out []string
	for _, n := range r.g.nodes {
		for _, name := range n.ProducedNames() {
			if !fs.ValidPath(name) || slices.Contains(out, name) {
				continue
			}
			if st, err := fs.Stat(arts, name); err == nil && st.Mode().IsRegular() {
				out = append(out, name)
			}
		}
	}
	return out
}

// save persists the state with the events journaled since the last save,
// then emits those events (state first, then the event that reports it).
// Events emitted by an earlier save are dropped from the state as it is
// written.
func (r *Runtime) save(ctx context.Context, s *session) error {
	kept := s.st.Unlogged
	s.st.Unlogged = kept[s.emitted:]
	if len(s.st.Unlogged) == 0 {
		s.st.Unlogged = nil
	}
	if err := r.opts.Store.Save(ctx, s.st.WorkItem, s.st); err != nil {
		s.st.Unlogged = kept
		s.saveFailed = true
		return fmt.Errorf("saving graph state of %s: %w", s.st.WorkItem, err)
	}
	for _, e := range s.st.Unlogged {
		r.emitJournal(s, e, false)
	}
	s.emitted = len(s.st.Unlogged)
	return nil
}

// logging reports whether events go anywhere.
func (r *Runtime) logging() bool {
	_, off := r.sink.(discardSink)
	return !off
}

// journal records the event reporting a transition in the state itself, so
// that the save which persists the transition persists its event too; flush
// emits it once saved. Without a sink it is an ordinary (discarded) event.
func (r *Runtime) journal(s *session, name string, level Level, fields ...Field) {
	if !r.logging() {
		return
	}
	s.st.Seq++
	e := JournalEntry{Seq: s.st.Seq, Time: s.now.UTC().Format(time.RFC3339Nano), Name: name, Level: level, Fields: make([]JournalField, len(fields))}
	for i, f := range fields {
		e.Fields[i] = JournalField(f)
	}
	s.st.Unlogged = append(s.st.Unlogged, e)
}

func (r *Runtime) emitJournal(s *session, e JournalEntry, relogged bool) {
	fields := make([]Field, 0, len(e.Fields)+2)
	for _, f := range e.Fields {
		fields = append(fields, Field(f))
	}
	fields = append(fields, Field{"seq", e.Seq})
	if relogged {
		fields = append(fields, Field{"relogged", true})
	}
	ref := s.wi.Ref
	if ref == "" {
		ref = s.wi.ID
	}
	at, err := time.Parse(time.RFC3339Nano, e.Time)
	if err != nil {
		at = s.now
	}
	r.sink.Emit(LogEvent{Time: at, Name: e.Name, Level: e.Level, Fields: append([]Field{{"work_item", ref}}, fields...)})
}

// flush ends a verb: the state is saved once more without the events its
// saves already emitted. Events journaled after the last save (a verb that
// failed before saving its transition) are dropped with the transition. A
// crash before this save leaves the emitted events in the state, to be
// emitted again, marked relogged, by the next locked verb: at least once,
// never before the state they report.
func (r *Runtime) flush(ctx context.Context, s *session) {
	// After a failed save the state in memory holds a transition that was
	// neither saved nor logged: it must not be saved now.
	if s.emitted == 0 || s.saveFailed {
		return
	}
	s.st.Unlogged = s.st.Unlogged[:s.emitted]
	_ = r.save(ctx, s)
}

// relog emits the events a killed verb saved but may not have logged, and
// clears them (under the lock).
func (r *Runtime) relog(ctx context.Context, s *session) {
	if len(s.st.Unlogged) == 0 || !r.logging() {
		return
	}
	for _, e := range s.st.Unlogged {
		r.emitJournal(s, e, true)
	}
	s.emitted = len(s.st.Unlogged)
}

func (r *Runtime) lock(ctx context.Context, id string) (func(), error) {
	unlock, err := r.opts.Store.Lock(ctx, id, r.opts.LockTimeout)
	if err != nil {
		return nil, err
	}
	return unlock, nil
}

// openLocked takes the work item's lock and loads its state, first logging
// any transition a killed verb saved without logging; the caller must defer
// r.done(ctx, s, unlock) when it returns no error.
func (r *Runtime) openLocked(ctx context.Context, id string) (s *session, unlock func(), err error) {
	unlock, err = r.lock(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	if s, err = r.open(ctx, id, missingFresh); err != nil {
		unlock()
		return nil, nil, err
	}
	r.relog(ctx, s)
	return s, unlock, nil
}

// done ends a locked verb: it flushes the journal, then releases the lock.
func (r *Runtime) done(ctx context.Context, s *session, unlock func()) {
	r.flush(ctx, s)
	unlock()
}

// --- skips -------------------------------------------------------------

// skipInfo is the effective skip set of a state: honoured declarations plus
// unselected opt-ins.
type skipInfo struct {
	decl    map[string]SkipDecl
	invalid map[string]bool
	// unproven holds human gates declared skipped that no verified
	// decision declares skipped (only with a verifier).
	unproven map[string]bool
}

func (k skipInfo) has(id string) bool { _, ok := k.decl[id]; return ok }

// skips filters the state's declarations through the compiled graph: a
// declaration is honoured only for a declared, skippable, non-required node;
// every opt-in node not selected is skipped with via "not-selected". With a
// verifier, a human gate counts as skipped only when a verified decision
// (phase selection) lists it among its skips, and an opt-in node a verified
// decision selected stays selected whatever the state says: graph-state.json
// is the agent's to edit, and a skip is as good as a pass.
func (r *Runtime) skips(ctx context.Context, s *session) skipInfo {
	st := s.st
	k := skipInfo{decl: map[string]SkipDecl{}, invalid: map[string]bool{}}
	var provenSkips, provenOptIns map[string]bool
	if r.opts.Verifier != nil {
		provenSkips, provenOptIns = map[string]bool{}, map[string]bool{}
		for _, key := range st.Decisions.Keys() {
			if r.verify(ctx, s, key) != nil {
				continue
			}
			d, _ := st.Decisions.Get(key)
			for _, n := range d.Skips {
				provenSkips[n] = true
			}
			for _, n := range d.OptIns {
				provenOptIns[n] = true
			}
		}
	}
	for _, id := range st.Skips.Keys() {
		d, _ := st.Skips.Get(id)
		n, ok := r.g.Node(id)
		if !ok || !n.Skippable || n.Required {
			k.invalid[id] = true
			continue
		}
		if provenSkips != nil && n.IsHuman() && !provenSkips[id] {
			if k.unproven == nil {
				k.unproven = map[string]bool{}
			}
			k.unproven[id] = true
			continue
		}
		k.decl[id] = d
	}
	for _, n := range r.g.nodes {
		if !n.OptIn {
			continue
		}
		if _, ok := k.decl[n.ID]; ok {
			continue
		}
		if st.OptIns.Has(n.ID) || provenOptIns[n.ID] {
			continue
		}
		k.decl[n.ID] = SkipDecl{Via: "not-selected"}
	}
	return k
}

// skippedArtifacts is every artifact name produced by a skipped node.
func (r *Runtime) skippedArtifacts(k skipInfo) map[string]bool {
	out := map[string]bool{}
	for _, n := range r.g.nodes {
		if !k.has(n.ID) {
			continue
		}
		for _, name := range n.ProducedNames() {
			out[name] = true
		}
	}
	return out
}

// SkipProvenance renders why a node is skipped, for reports and logs.
func SkipProvenance(d SkipDecl) string {
	if d.Via == "not-selected" {
		return "not selected — an opt-in phase, off unless it is ticked at `phase-selection`"
	}
	via := d.Via
	if via == "" {
		via = "unknown"
	}
	s := "skipped by declaration — via " + via
	if d.Token != "" {
		s += ", token '" + d.Token + "'"
	}
	if d.By != "" {
		s += ", by " + d.By
	}
	if d.Reason != "" {
		s += ", reason: " + d.Reason
	}
	return s
}

// routeSkips walks from id around every skipped node along its `skipped`
// edge, recording each as skipped, and returns the first node that is not
// skipped. A skipped node without a `skipped` edge (impossible in a compiled
// graph) is landed on: fail closed.
func (r *Runtime) routeSkips(s *session, id string, k skipInfo) string {
	visited := map[string]bool{}
	for k.has(id) && !visited[id] {
		visited[id] = true
		to, ok := r.g.Next(id, OutcomeSkipped)
		if !ok {
			break
		}
		now := s.now
		s.st.update(id, func(rec *NodeRecord) {
			if rec.EnteredAt == "" {
				rec.EnteredAt = Timestamp(now)
			}
			rec.Outcome = OutcomeSkipped
			rec.ExitedAt = Timestamp(now)
		})
		d := k.decl[id]
		fields := []Field{{"node", id}}
		for _, kv := range [][2]string{{"via", d.Via}, {"token", d.Token}, {"by", d.By}, {"reason", d.Reason}, {"at", d.At}} {
			if kv[1] != "" {
				fields = append(fields, Field{kv[0], kv[1]})
			}
		}
		r.journal(s, "graph.node_skipped", LevelInfo, fields...)
		id = to
	}
	return id
}

// --- evaluation ----------------------------------------------------------

func (r *Runtime) hookContext(ctx context.Context, s *session, n *Node, b Boundary, mode Mode, ev *Event, k *skipInfo) *HookContext {
	hc := &HookContext{
		WorkItem: s.wi,
		Node:     n,
		Boundary: b,
		Mode:     mode,
		Session:  s.st.Session,
		Event:    ev,
		Config:   r.opts.Config,
		Surface:  s.st.Surface,
		Graph:    r.g,
		Now:      s.now,
		observe:  r.opts.HookObserver,
	}
	if mode == ModeCheck {
		if s.ro == nil {
			s.ro = &readOnly{Artifacts: s.arts}
		}
		hc.Artifacts = s.ro
	} else {
		hc.Artifacts = s.arts
		hc.Integrations = r.opts.Integrations
		hc.Commands = r.opts.Commands
		if r.opts.Deliver != nil {
			id := s.wi.ID
			deliver := r.opts.Deliver
			hc.Deliver = func(ctx context.Context, text string) (bool, error) { return deliver(ctx, id, text) }
		}
	}
	if b == Exit && k != nil {
		if s.exitFor != k {
			s.decisions = make(map[string]Decision, s.st.Decisions.Len())
			for _, key := range s.st.Decisions.Keys() {
				// With a verifier, hooks see only the decisions that count.
				if r.verify(ctx, s, key) != nil {
					continue
				}
				s.decisions[key], _ = s.st.Decisions.Get(key)
			}
			s.skipped = r.skippedArtifacts(*k)
			s.skippedNodes = make(map[string]bool, len(k.decl))
			for id := range k.decl {
				s.skippedNodes[id] = true
			}
			s.exitFor = k
		}
		hc.Decisions = s.decisions
		hc.SkippedArtifacts = s.skipped
		hc.SkippedNodes = s.skippedNodes
	}
	return hc
}

// standingDecision returns the recorded verdict of a human gate when it
// still stands: its outcome leads forward (to a later node, or nowhere from
// a terminal node). A verdict that sent the work item back (changes
// requested) does not satisfy the gate; the gate waits for a new review.
func (r *Runtime) standingDecision(st *State, n *Node) (Decision, bool) {
	if !n.IsHuman() {
		return Decision{}, false
	}
	d, ok := st.Decisions.Get(n.ID)
	if !ok || d.Outcome == "" {
		return Decision{}, false
	}
	to, ok := r.g.Next(n.ID, d.Outcome)
	if !ok {
		return d, n.Terminal
	}
	if target, _ := r.g.Node(to); target != nil && target.Index > n.Index {
		return d, true
	}
	return Decision{}, false
}

// standing returns the outcome of a human gate whose recorded decision
// still stands, without running its chain.
func (r *Runtime) standing(st *State, n *Node) (ChainOutcome, bool) {
	d, ok := r.standingDecision(st, n)
	if !ok {
		return ChainOutcome{}, false
	}
	res := PassWith(d.Outcome, map[string]any{"decision": n.ID, "recorded": true})
	res.Hook = "(recorded decision)"
	text := "recorded decision: " + d.Outcome + decisionBy(d)
	if d.At != "" {
		text += " at " + d.At
	}
	res.Messages = []Message{{Text: text, Severity: SeverityInfo}}
	return ChainOutcome{Status: StatusPass, Results: []HookResult{res}, Blocking: -1}, true
}

// evaluate runs n's exit chain (or honours its standing decision). A
// standing decision the verifier refuses blocks without an event; an
// inbound event drops the refused record and decides the gate afresh.
func (r *Runtime) evaluate(ctx context.Context, s *session, n *Node, mode Mode, ev *Event, k *skipInfo) ChainOutcome {
	if c, ok := r.standing(s.st, n); ok {
		err := r.verify(ctx, s, n.ID)
		if err == nil {
			return c
		}
		if ev == nil {
			return refused(n, err)
		}
		s.st.Decisions.Delete(n.ID)
		delete(s.verdicts, n.ID)
		s.exitFor = nil
		r.journal(s, "graph.decision_refused", LevelWarning, Field{"node", n.ID}, Field{"error", err.Error()})
	}
	return runChains(ctx, sharedPool, []chainJob{{n.Exit, r.hookContext(ctx, s, n, Exit, mode, ev, k)}})[0]
}

func decisionBy(d Decision) string {
	if d.By == "" {
		return ""
	}
	return " by " + d.By
}

// Status evaluates every node's exit chain, in declaration order, purely
// (ModeCheck: no writes, no network, no subprocess) and reports each
// verdict. With recompute the stored pointer, parking and forced flags are
// ignored: the current node is the first node that is not satisfied, from
// the artifacts and the recorded human decisions, skips and opt-ins alone.
// Status takes no lock and writes nothing.
func (r *Runtime) Status(ctx context.Context, id string, recompute bool) (*Report, error) {
	// With recompute the report derives the pointer itself: the missing
	// state is only noted, not evaluated twice.
	policy := missingReconstruct
	if recompute {
		policy = missingNote
	}
	s, err := r.open(ctx, id, policy)
	if err != nil {
		return nil, err
	}
	rep := r.evaluateAll(ctx, s, recompute)
	if policy == missingNote && len(s.lost) > 0 {
		r.warnLost(s, rep.CurrentNode)
	}
	rep.Warnings = append(rep.Warnings, s.warn...)
	return rep, nil
}

func (r *Runtime) evaluateAll(ctx context.Context, s *session, recompute bool) *Report {
	k := r.skips(ctx, s)
	rep := &Report{WorkItem: s.st.WorkItem, Nodes: make([]NodeReport, len(r.g.nodes))}
	// Every chain of the check runs in one batch: one hand-off to a worker
	// goroutine for the whole graph.
	outcomes := make([]ChainOutcome, len(r.g.nodes))
	decided := map[int]bool{}
	var jobs []chainJob
	var jobNodes []int
	for i, n := range r.g.nodes {
		if k.has(n.ID) {
			continue
		}
		if c, ok := r.standing(s.st, n); ok {
			if err := r.verify(ctx, s, n.ID); err != nil {
				outcomes[i] = refused(n, err)
			} else {
				outcomes[i] = c
				decided[i] = true
			}
			continue
		}
		jobs = append(jobs, chainJob{n.Exit, r.hookContext(ctx, s, n, Exit, ModeCheck, nil, &k)})
		jobNodes = append(jobNodes, i)
	}
	for j, c := range runChains(ctx, sharedPool, jobs) {
		outcomes[jobNodes[j]] = c
	}
	first := ""
	for i, n := range r.g.nodes {
		rec := s.st.Record(n.ID)
		nr := NodeReport{Node: n.ID, Attempts: rec.Attempts, Forced: rec.Forced && !recompute, Messages: []string{}}
		if d, ok := k.decl[n.ID]; ok {
			nr.Status, nr.Outcome = string(StatusSkip), OutcomeSkipped
			nr.Messages = append(nr.Messages, SkipProvenance(d))
		} else {
			c := outcomes[i]
			nr.Status, nr.Outcome = string(c.Status), c.Outcome()
			for _, m := range c.Messages() {
				nr.Messages = append(nr.Messages, m.String())
			}
			if decided[i] {
				// Say why a gate passes without an event: its recorded verdict.
				nr.Messages = append(nr.Messages, c.Results[0].Messages[0].String())
			}
			if k.invalid[n.ID] {
				nr.Messages = append(nr.Messages, "graph state declares a skip on this node, which is not skippable — the declaration is refused and has no effect")
			}
			if k.unproven[n.ID] {
				nr.Messages = append(nr.Messages, "graph state declares this human gate skipped, but no verified decision does — the declaration is refused: a gate is skipped only by a signed phase selection")
			}
		}
		if first == "" && nr.Status != string(StatusPass) && nr.Status != string(StatusSkip) {
			first = n.ID
		}
		rep.Nodes[i] = nr
	}
	if recompute {
		rep.CurrentNode = first
		if first == "" && len(r.g.nodes) > 0 {
			rep.CurrentNode = r.g.nodes[len(r.g.nodes)-1].ID
		}
	} else {
		rep.CurrentNode = s.st.CurrentNode
		if rep.CurrentNode == "" {
			rep.CurrentNode = r.g.Start
		}
		rep.Parked = s.st.Parked
	}
	rep.OK = true
	cur, declared := r.g.Node(rep.CurrentNode)
	for i, nr := range rep.Nodes {
		if declared && i > cur.Index {
			break
		}
		if nr.Status != string(StatusPass) && nr.Status != string(StatusSkip) {
			rep.OK = false
			break
		}
	}
	return rep
}

// --- Start ---------------------------------------------------------------

// Start enters the graph's start node (routing around declared skips) and
// runs its entry chain. The pointer is saved before the chain runs. Start is
// idempotent: for a work item that already has a pointer it returns
// (nil, nil) and changes nothing.
func (r *Runtime) Start(ctx context.Context, id string) (*StepReport, error) {
	s, unlock, err := r.openLocked(ctx, id)
	if err != nil {
		return nil, err
	}
	defer r.done(ctx, s, unlock)
	if s.st.CurrentNode != "" {
		return nil, nil
	}
	node := r.routeSkips(s, r.g.Start, r.skips(ctx, s))
	if r.g.Name != "" || s.st.Loop == "" {
		s.st.Loop = r.g.Name
	}
	rep := &StepReport{Node: node, Status: string(StatusPass), Outcome: string(StatusPass), Messages: []string{}, Moved: true}
	r.journal(s, "graph.started", LevelInfo, Field{"node", node})
	msgs, err := r.enter(ctx, s, node, entryStart)
	if err != nil {
		return nil, err
	}
	rep.Messages = append(append(rep.Messages, s.warn...), msgs...)
	rep.Attempts = s.st.Record(node).Attempts
	rep.CurrentNode = s.st.CurrentNode
	return rep, nil
}

// How a node is entered.
type entryKind int

const (
	entryStart entryKind = iota
	entryEdge
	entryForce
)

// enter moves the pointer to id, saves, and runs id's entry chain. It
// returns report messages (degradations, an entry chain that stopped).
func (r *Runtime) enter(ctx context.Context, s *session, id string, how entryKind) ([]string, error) {
	forced := how == entryForce
	n, _ := r.g.Node(id)
	s.st.Enter(id, s.now)
	if forced {
		s.st.update(id, func(rec *NodeRecord) { rec.Forced = true })
	}
	// A gate entered again is reviewed again: its previous verdict no
	// longer stands.
	s.st.Decisions.Delete(id)
	if err := r.save(ctx, s); err != nil {
		return nil, err
	}
	if n.IsHuman() && how == entryEdge {
		res, sess := r.resolveSession(s.st, n)
		fields := []Field{{"node", id}, {"resolution", res}}
		if sess != "" {
			fields = append(fields, Field{"session", sess})
		}
		r.emit(s, "graph.gate_session", LevelInfo, fields...)
	}
	c := runChains(ctx, sharedPool, []chainJob{{n.Entry, r.hookContext(ctx, s, n, Entry, ModeLive, nil, nil)}})[0]
	msgs := r.noteDegraded(s, id, c)
	for _, res := range c.Results {
		if res.Status == StatusSkip && r.logging() {
			// The state was saved before the entry chain ran: entry skips
			// go to the event log only.
			r.emit(s, "graph.hook_skipped", LevelInfo, Field{"node", id}, Field{"boundary", string(Entry)}, Field{"hook", res.Hook})
		}
	}
	if !c.Satisfied() {
		msgs = append(msgs, fmt.Sprintf("warning: the entry chain of %s stopped: %s", id, c.Render()))
		r.emit(s, "graph.entry_incomplete", LevelWarning, Field{"node", id}, Field{"hook", c.BlockingHook()})
	}
	return msgs, nil
}

// resolveSession decides which agent session a human gate uses (§5.9).
func (r *Runtime) resolveSession(st *State, n *Node) (string, string) {
	if n.Session != SessionInherit {
		return "new", ""
	}
	if st.Session != nil && (st.Session.Alive == nil || *st.Session.Alive) {
		return "inherited", st.Session.ID
	}
	return "fresh-with-artifacts", ""
}

// noteSkips records the hooks of a live exit-chain evaluation that reported
// skip: in the node's record and, with the state, in the event log (R2.5,
// R8.7).
func (r *Runtime) noteSkips(s *session, node string, c ChainOutcome) {
	prev := s.st.Record(node).SkippedHooks
	n, same, logging := 0, true, r.logging()
	for _, res := range c.Results {
		if res.Status == StatusSkip {
			same = same && n < len(prev) && prev[n] == res.Hook
			n++
			if logging { // the fields are not even built for a discarding sink
				r.journal(s, "graph.hook_skipped", LevelInfo, Field{"node", node}, Field{"boundary", string(Exit)}, Field{"hook", res.Hook})
			}
		}
	}
	if same && n == len(prev) {
		return // the record already says so: no copy on the hot path
	}
	var skipped []string
	if n > 0 {
		skipped = make([]string, 0, n)
		for _, res := range c.Results {
			if res.Status == StatusSkip {
				skipped = append(skipped, res.Hook)
			}
		}
	}
	s.st.update(node, func(rec *NodeRecord) { rec.SkippedHooks = skipped })
}

func (r *Runtime) noteDegraded(s *session, node string, c ChainOutcome) []string {
	var msgs []string
	for _, res := range c.Degraded() {
		e := res.DataString("error")
		msgs = append(msgs, fmt.Sprintf("warning: %s did not complete: %s", res.Hook, e))
		r.emit(s, "graph.hook_degraded", LevelWarning, Field{"node", node}, Field{"hook", res.Hook}, Field{"error", e})
	}
	return msgs
}

// --- Advance -------------------------------------------------------------

// Advance re-evaluates the work item's current node with ev (nil for a claim
// or a CLI advance, which carry no verdict) and, when the exit chain passes,
// takes the edge for its outcome, routes around declared skips, saves, and
// runs the new node's entry chain. wait parks the node; block counts an
// attempt; the same block twice in a row, or attempts reaching maxAttempts,
// escalates — the node is parked, and only a new event, a force, or a fix
// that makes the exit chain stop blocking (checked purely, counting no
// attempt) moves it.
func (r *Runtime) Advance(ctx context.Context, id string, ev *Event) (*StepReport, error) {
	s, unlock, err := r.openLocked(ctx, id)
	if err != nil {
		return nil, err
	}
	defer r.done(ctx, s, unlock)
	return r.advance(ctx, s, ev)
}

func (r *Runtime) advance(ctx context.Context, s *session, ev *Event) (*StepReport, error) {
	st := s.st
	if st.CurrentNode == "" {
		return nil, fmt.Errorf("%s: %w; start it first (the daemon does on `the-loop start`, or `loopctl graph run`)", s.wi.ID, ErrNotStarted)
	}
	node, ok := r.g.Node(st.CurrentNode)
	if !ok {
		return nil, fmt.Errorf("%s: the current node '%s' is not declared in graph %s: %w; move it with `loopctl graph force --to <node> --reason ...` (declared nodes: %s)",
			s.wi.ID, st.CurrentNode, r.g.Name, ErrUnknownNode, strings.Join(r.g.IDs(), ", "))
	}
	rep := &StepReport{Node: node.ID, Messages: append([]string{}, s.warn...), CurrentNode: node.ID}

	var lifted *Parked
	liftedMsg := 0
	if p := st.Parked; p != nil && p.Escalated && p.Node == node.ID && ev == nil {
		// An escalated node does not retry its block (decision 3), but a
		// fix that landed is not a retry: a pure check of the exit chain
		// (no side effects, no attempt counted) tells whether the block is
		// gone. Still blocking: stay parked, with the current reason rather
		// than a stale one. Not blocking: the parking is lifted and the
		// node is evaluated as usual below.
		pk := r.skips(ctx, s)
		pc := r.evaluate(ctx, s, node, ModeCheck, nil, &pk)
		if pc.Status == StatusBlock {
			if reason := pc.Render(); reason != "" && reason != p.Reason {
				p.Reason = reason
				if err := r.save(ctx, s); err != nil {
					return nil, err
				}
			}
			rep.Status, rep.Outcome = StepEscalated, StepEscalated
			rep.Attempts = st.Record(node.ID).Attempts
			rep.Messages = append(rep.Messages, "this node escalated and is parked until its block is fixed or a human acts (a new event on the work item, or `loopctl graph force`)", p.Reason)
			return rep, nil
		}
		st.Parked = nil
		lifted, liftedMsg = p, len(rep.Messages)
		rep.Messages = append(rep.Messages, fmt.Sprintf("%s no longer blocks: the escalation is lifted", node.ID))
	}

	k := r.skips(ctx, s)
	c := r.evaluate(ctx, s, node, ModeLive, ev, &k)
	rep.Outcome = c.Outcome()
	for _, m := range c.Messages() {
		rep.Messages = append(rep.Messages, m.String())
	}
	rep.Messages = append(rep.Messages, r.noteDegraded(s, node.ID, c)...)
	r.noteSkips(s, node.ID, c)

	switch c.Status {
	case StatusWait:
		reason := c.Render()
		if reason == "" {
			reason = "awaiting a human"
		}
		st.Park(node.ID, reason, false, s.now)
		st.Parked.Hook = c.BlockingHook()
		r.journal(s, "graph.parked", LevelInfo, Field{"node", node.ID}, Field{"hook", c.BlockingHook()})
		if err := r.save(ctx, s); err != nil {
			return nil, err
		}
		rep.Status = string(StatusWait)
		rep.Attempts = st.Record(node.ID).Attempts
		return rep, nil

	case StatusBlock:
		rendered := c.Render()
		if lifted != nil && rendered == lifted.Reason {
			// The pure check passed but the live chain (a hook that runs a
			// program, say) still blocks the same way: this is the same
			// escalation, not a new one. Stay parked without counting an
			// attempt or notifying anyone again.
			st.Parked = lifted
			rep.Status, rep.Outcome = StepEscalated, StepEscalated
			rep.Attempts = st.Record(node.ID).Attempts
			rep.Messages = append(rep.Messages[:liftedMsg:liftedMsg], rep.Messages[liftedMsg+1:]...)
			rep.Messages = append(rep.Messages, "still the same block: the node stays escalated")
			return rep, nil
		}
		repeated := st.NoteBlock(node.ID, rendered)
		attempts := st.Record(node.ID).Attempts
		rep.Attempts = attempts
		if repeated || attempts >= node.MaxAttempts {
			st.Park(node.ID, rendered, true, s.now)
			st.Parked.Hook = c.BlockingHook()
			r.journal(s, "graph.escalated", LevelWarning, Field{"node", node.ID}, Field{"attempts", attempts}, Field{"repeated", repeated})
			if err := r.save(ctx, s); err != nil {
				return nil, err
			}
			rep.Status = StepEscalated
			if repeated {
				rep.Messages = append(rep.Messages, "escalated: the same block twice in a row; a human has been asked to look")
			} else {
				rep.Messages = append(rep.Messages, fmt.Sprintf("escalated: %d attempts reached this node's limit of %d; a human has been asked to look", attempts, node.MaxAttempts))
			}
			rep.Messages = append(rep.Messages, r.escalate(ctx, s, node)...)
			return rep, nil
		}
		r.journal(s, "graph.blocked", LevelInfo, Field{"node", node.ID}, Field{"hook", c.BlockingHook()})
		if err := r.save(ctx, s); err != nil {
			return nil, err
		}
		rep.Status = string(StatusBlock)
		return rep, nil
	}

	// Satisfied.
	if r.recordFacts(ctx, s, node, c, ev) {
		k = r.skips(ctx, s)
	}
	outcome := c.Outcome()
	st.Exit(node.ID, outcome, s.now)
	target, found := r.g.Next(node.ID, outcome)
	if !found {
		rep.Attempts = st.Record(node.ID).Attempts
		if node.Terminal {
			r.journal(s, "graph.completed", LevelInfo, Field{"node", node.ID})
			if err := r.save(ctx, s); err != nil {
				return nil, err
			}
			rep.Status = string(StatusPass)
			rep.Messages = append(rep.Messages, "the walk is complete")
			return rep, nil
		}
		reason := fmt.Sprintf("no declared edge from %s on '%s'", node.ID, outcome)
		st.Park(node.ID, reason, true, s.now)
		r.journal(s, "graph.no_edge", LevelWarning, Field{"node", node.ID}, Field{"outcome", outcome})
		if err := r.save(ctx, s); err != nil {
			return nil, err
		}
		rep.Status = StepEscalated
		rep.Messages = append(rep.Messages, fmt.Sprintf("no declared edge from %s on outcome '%s'", node.ID, outcome))
		rep.Messages = append(rep.Messages, r.escalate(ctx, s, node)...)
		return rep, nil
	}
	target = r.routeSkips(s, target, k)
	r.journal(s, "graph.advanced", LevelInfo, Field{"node", node.ID}, Field{"to", target}, Field{"outcome", outcome})
	msgs, err := r.enter(ctx, s, target, entryEdge)
	if err != nil {
		return nil, err
	}
	rep.Status = string(StatusPass)
	rep.Moved = true
	rep.CurrentNode = target
	rep.Attempts = st.Record(node.ID).Attempts
	rep.Messages = append(rep.Messages, "advanced to "+target)
	rep.Messages = append(rep.Messages, msgs...)
	return rep, nil
}

// escalate runs the graph's onEscalation chain for node (state is saved).
func (r *Runtime) escalate(ctx context.Context, s *session, n *Node) []string {
	if len(r.g.onEscalation) == 0 {
		return nil
	}
	c := runChains(ctx, sharedPool, []chainJob{{r.g.onEscalation, r.hookContext(ctx, s, n, Entry, ModeLive, nil, nil)}})[0]
	msgs := r.noteDegraded(s, n.ID, c)
	if !c.Satisfied() {
		msgs = append(msgs, "warning: the escalation chain stopped: "+c.Render())
	}
	return msgs
}

// recordFacts records what a satisfied exit chain decided (§5.8, and the
// gate verdict of decision 2). It reports whether skips or opt-ins changed.
func (r *Runtime) recordFacts(ctx context.Context, s *session, n *Node, c ChainOutcome, ev *Event) bool {
	st := s.st
	at := Timestamp(s.now)
	var recorded []string
	for _, res := range c.Results {
		key := res.DataString("decision")
		if key == "" || res.Data["recorded"] == true {
			continue
		}
		d := Decision{At: at, Outcome: res.Outcome(), By: res.DataString("by"), Comment: res.DataString("comment")}
		if ev != nil {
			d.Event = ev.ID
		}
		if fg, ok := res.Data["frozenGraph"]; ok && fg != nil {
			d.Graph = rawJSON(fg)
			d.Via = res.DataString("selectionSource")
		}
		if sf := res.DataString("surface"); sf != "" {
			d.Surface = sf
			st.Surface = sf
		}
		d.SessionPerPr = res.DataString("sessionPerPr")
		if g, ok := res.Data["goal"]; ok && g != nil {
			d.Goal = rawJSON(g)
		}
		if st.Decisions.SetDefault(key, d) {
			recorded = append(recorded, key)
		}
	}
	// A human gate's verdict is a recorded decision with provenance.
	if n.IsHuman() && !st.Decisions.Has(n.ID) {
		if last := lastDecisive(c); last != nil && last.Data["recorded"] != true {
			d := Decision{At: at, Outcome: c.Outcome(), By: last.DataString("by"), Comment: last.DataString("comment"), Via: "event"}
			if ev != nil {
				d.Event = ev.ID
				if d.Comment == "" && len(ev.Comments) > 0 {
					d.Comment = ev.Comments[len(ev.Comments)-1].ID
				}
			}
			st.Decisions.Set(n.ID, d)
			recorded = append(recorded, n.ID)
		}
	}

	changed := false
	var skipped, opted []string
	for _, res := range c.Results {
		for node, raw := range AsValues(res.Data["declaredSkips"]) {
			t, ok := r.g.Node(node)
			if !ok || !t.Skippable || t.Required || st.Record(node).EnteredAt != "" {
				continue
			}
			v := AsValues(raw)
			if st.Skips.SetDefault(node, SkipDecl{Via: v.StringOr("via", "selection"), Token: v.StringOr("token", node), By: v.String("by"), Reason: v.String("reason"), At: at}) {
				skipped = append(skipped, node)
				changed = true
			}
		}
		for node, raw := range AsValues(res.Data["optIns"]) {
			t, ok := r.g.Node(node)
			if !ok || !t.OptIn || st.Record(node).EnteredAt != "" {
				continue
			}
			v := AsValues(raw)
			if st.OptIns.SetDefault(node, OptInSelection{Via: v.StringOr("via", "selection"), Token: v.StringOr("token", node), By: v.String("by"), At: at}) {
				opted = append(opted, node)
				changed = true
			}
		}
	}
	if len(skipped) > 0 {
		sort.Strings(skipped)
		r.journal(s, "graph.skips_declared", LevelInfo, Field{"via", "selection"}, Field{"nodes", skipped})
	}
	if len(opted) > 0 {
		sort.Strings(opted)
		r.journal(s, "graph.opt_ins_selected", LevelInfo, Field{"via", "selection"}, Field{"nodes", opted})
	}
	// The decisions recorded here carry the skips and opt-ins they made,
	// under their signature: a verifier honours a skipped human gate only
	// on that proof.
	if len(recorded) > 0 {
		gated := gatedNames(c)
		for _, key := range recorded {
			if len(skipped) > 0 || len(opted) > 0 {
				d, _ := st.Decisions.Get(key)
				d.Skips, d.OptIns = append([]string(nil), skipped...), append([]string(nil), opted...)
				st.Decisions.Set(key, d)
			}
			r.sign(ctx, s, key, gated, ev)
		}
	}
	return changed
}

// rawJSON serialises hook data for a decision record (nil when it cannot).
func rawJSON(v any) json.RawMessage {
	b, err := marshalNoEscape(v)
	if err != nil {
		return nil
	}
	return b
}

// lastDecisive is the last result carrying a routing outcome.
func lastDecisive(c ChainOutcome) *HookResult {
	for i := len(c.Results) - 1; i >= 0; i-- {
		if o, ok := c.Results[i].Data["outcome"].(string); ok && o != "" {
			return &c.Results[i]
		}
	}
	return nil
}

// --- Complete ------------------------------------------------------------

// Complete is an agent's claim that node's work is done ("" = the current
// node). A claim is not a verdict: it records the claimant and runs the
// node's real exit chain with no event (so a human gate answers wait). A
// claim on a node behind the pointer is a no-op; on any other node that is
// not current it is refused. The whole load→evaluate→save runs under the
// state lock; a busy lock answers status "busy".
func (r *Runtime) Complete(ctx context.Context, id, node, actor string) (*Claim, error) {
	s, unlock, err := r.openLocked(ctx, id)
	if errors.Is(err, ErrBusy) {
		return &Claim{Node: node, Status: StepBusy, Messages: []string{"another theloop process holds the graph-state lock; try again"}, Reason: "busy"}, nil
	}
	if err != nil {
		return nil, err
	}
	defer r.done(ctx, s, unlock)
	cur := s.st.CurrentNode
	if cur == "" {
		return &Claim{Node: node, Status: StepRefused, Reason: "not-started", Messages: []string{"this work item has not entered the graph; nothing to complete"}}, nil
	}
	claimed := node
	if claimed == "" {
		claimed = cur
	}
	if claimed != cur {
		c := &Claim{Node: claimed, CurrentNode: cur, Messages: []string{fmt.Sprintf("the current node is '%s'", cur)}}
		if r.g.Before(claimed, cur) {
			c.Status, c.Reason = StepNoop, "already-past"
			c.Messages[0] += " and the claimed node is behind it"
		} else {
			c.Status, c.Reason = StepRefused, "not-current"
			if _, ok := r.g.Node(claimed); !ok {
				c.Messages = append(c.Messages, fmt.Sprintf("'%s' is not a node of this graph; declared nodes are: %s", claimed, strings.Join(r.g.IDs(), ", ")))
			}
		}
		return c, nil
	}
	by := actor
	if by == "" {
		by = "cli"
	}
	s.st.Completions.Set(claimed, Completion{At: Timestamp(s.now), By: by})
	if err := r.save(ctx, s); err != nil {
		return nil, err
	}
	step, err := r.advance(ctx, s, nil)
	if err != nil {
		return nil, err
	}
	return &Claim{Node: claimed, Status: step.Status, Outcome: step.Outcome, Moved: s.st.CurrentNode != cur,
		CurrentNode: s.st.CurrentNode, Messages: step.Messages}, nil
}

// --- Force ---------------------------------------------------------------

// Force moves the pointer to node `to` regardless of gates — the audited
// escape hatch. It needs a reason, refuses undeclared nodes, warns about an
// undeclared edge and a bypassed required node, enters the target (running
// its entry chain, also when going backwards) and is recorded in state, the
// event log and, through the Auditor, the execution log and the ticket. It
// never forges a verdict: Status with recompute still reports the bypassed
// gates as unmet.
func (r *Runtime) Force(ctx context.Context, id, to, reason, actor string) (*ForceResult, error) {
	reason = strings.TrimSpace(reason)
	if reason == "" {
		return nil, fmt.Errorf("%w: an unexplained override is refused. Record why you are bypassing the gate (--reason)", ErrReasonRequired)
	}
	target, ok := r.g.Node(to)
	if !ok {
		return nil, fmt.Errorf("%w '%s'; declared nodes are: %s", ErrUnknownNode, to, strings.Join(r.g.IDs(), ", "))
	}
	s, unlock, err := r.openLocked(ctx, id)
	if err != nil {
		return nil, err
	}
	defer r.done(ctx, s, unlock)
	from := s.st.CurrentNode
	if from == "" {
		from = r.g.Start
	}
	var warnings []string
	// Forcing the current node re-enters it (a reset: attempts counted
	// anew, parking cleared); that is not a walk outside the model.
	if from != to && !r.declaredEdge(from, to) {
		warnings = append(warnings, fmt.Sprintf("%s → %s is not a declared edge; you are deliberately outside the model", from, to))
	}
	if fn, ok := r.g.Node(from); ok && fn.Required && from != to {
		warnings = append(warnings, fmt.Sprintf("node '%s' is marked required — this force bypasses a guarantee the process treats as mandatory", from))
	} else if target.Required && from != to {
		warnings = append(warnings, fmt.Sprintf("node '%s' is marked required — this force bypasses a guarantee the process treats as mandatory", to))
	}
	for _, gate := range r.bypassedGates(s, from, to) {
		warnings = append(warnings, fmt.Sprintf("human gate '%s' is bypassed — no recorded human decision lets the work item past it", gate))
	}
	if actor == "" {
		actor = "(shell)"
	}
	rec := ForceRecord{From: from, To: to, Reason: reason, Actor: actor, At: Timestamp(s.now), Warnings: append([]string{}, warnings...)}
	s.st.Forced = append(s.st.Forced, rec)
	res := &ForceResult{WorkItem: s.wi.Ref, FromNode: from, ToNode: to, Reason: reason, Warnings: warnings, Messages: append([]string{}, s.warn...)}
	if res.WorkItem == "" {
		res.WorkItem = s.wi.ID
	}
	// The event is saved with the forced state by enter and logged after
	// it: never an event for a force that did not happen.
	r.journal(s, "graph.forced", LevelWarning, Field{"from", from}, Field{"to", to}, Field{"actor", actor}, Field{"reason", reason})
	msgs, err := r.enter(ctx, s, to, entryForce)
	if err != nil {
		return nil, err
	}
	res.Messages = append(res.Messages, msgs...)
	if r.opts.Auditor != nil {
		if err := r.opts.Auditor.Forced(ctx, s.wi, rec); err != nil {
			res.Warnings = append(res.Warnings, "could not record the audit trail: "+err.Error())
		}
	}
	return res, nil
}

// bypassedGates names, in declaration order, the human gates a force from
// → to walks past (R10.9): from itself when it is a human gate, and every
// human gate declared between from and to, when to lies ahead. A gate the
// work item declared skipped is not bypassed; forcing backwards or in place
// bypasses nothing.
func (r *Runtime) bypassedGates(s *session, from, to string) []string {
	if from == to || !r.g.Before(from, to) {
		return nil
	}
	fn, _ := r.g.Node(from)
	tn, _ := r.g.Node(to)
	var out []string
	for _, n := range r.g.nodes[fn.Index:tn.Index] {
		if n.IsHuman() && !s.st.Skips.Has(n.ID) {
			out = append(out, n.ID)
		}
	}
	return out
}

func (r *Runtime) declaredEdge(from, to string) bool {
	if next, ok := r.g.Next(from, string(StatusPass)); ok && next == to {
		return true
	}
	for _, e := range r.g.edges {
		if e.From == from && e.To == to {
			return true
		}
	}
	return false
}

// --- DeclareSkips ----------------------------------------------------------

// DeclareSkips records skip declarations for nodes or skip sets (tokens)
// that the work item has not reached. A reason is required. A node already
// entered, current, or behind the pointer is rejected: a skip is a plan,
// not an amnesty.
func (r *Runtime) DeclareSkips(ctx context.Context, id string, tokens []string, reason, actor string) (*SkipResult, error) {
	reason = strings.TrimSpace(reason)
	if reason == "" {
		return nil, fmt.Errorf("%w: an unexplained skip is refused. Record why this work item does not walk the phase (--reason)", ErrReasonRequired)
	}
	type pick struct{ node, token string }
	var picks []pick
	seen := map[string]bool{}
	res := &SkipResult{Reason: reason, Declared: []string{}, Rejected: []SkipRejection{}, Warnings: []string{}}
	for _, t := range tokens {
		t = strings.TrimSpace(t)
		if t == "" {
			continue
		}
		if members, ok := r.g.SkipSet(t); ok {
			for _, m := range members {
				if !seen[m] {
					seen[m] = true
					picks = append(picks, pick{m, t})
				}
			}
			continue
		}
		if n, ok := r.g.Node(t); ok && n.Skippable && !n.Required {
			if !seen[t] {
				seen[t] = true
				picks = append(picks, pick{t, t})
			}
			continue
		}
		res.Rejected = append(res.Rejected, SkipRejection{Token: t, Why: "not a skippable node or shipped skip set"})
	}
	if len(picks) == 0 && len(res.Rejected) == 0 {
		return nil, fmt.Errorf("%w: name at least one node or skip set to declare", ErrReasonRequired)
	}
	s, unlock, err := r.openLocked(ctx, id)
	if err != nil {
		return nil, err
	}
	defer r.done(ctx, s, unlock)
	res.WorkItem = s.wi.Ref
	if res.WorkItem == "" {
		res.WorkItem = s.wi.ID
	}
	if actor == "" {
		actor = "(shell)"
	}
	cur := s.st.CurrentNode
	at := Timestamp(s.now)
	for _, p := range picks {
		if n, _ := r.g.Node(p.node); r.opts.Verifier != nil && n != nil && n.IsHuman() {
			res.Rejected = append(res.Rejected, SkipRejection{Token: p.node, Why: "a human gate is skipped only by a signed phase selection, not from the command line"})
			continue
		}
		if p.node == cur || s.st.Record(p.node).EnteredAt != "" || (cur != "" && r.g.Before(p.node, cur)) {
			res.Rejected = append(res.Rejected, SkipRejection{Token: p.node, Why: "already entered or behind the pointer — a skip is a plan, not an amnesty"})
			continue
		}
		if s.st.Skips.SetDefault(p.node, SkipDecl{Via: "cli", Token: p.token, By: actor, Reason: reason, At: at}) {
			res.Declared = append(res.Declared, p.node)
		}
	}
	if len(res.Declared) > 0 {
		r.journal(s, "graph.skips_declared", LevelInfo, Field{"via", "cli"}, Field{"actor", actor}, Field{"reason", reason}, Field{"nodes", res.Declared})
		if err := r.save(ctx, s); err != nil {
			return nil, err
		}
		if r.opts.Auditor != nil {
			if err := r.opts.Auditor.SkipsDeclared(ctx, s.wi, res.Declared, actor, reason); err != nil {
				res.Warnings = append(res.Warnings, "could not record the audit trail: "+err.Error())
			}
		}
	}
	for _, rj := range res.Rejected {
		r.emit(s, "graph.skips_rejected", LevelWarning, Field{"token", rj.Token}, Field{"via", "cli"}, Field{"why", rj.Why})
	}
	return res, nil
}

// --- Session binding --------------------------------------------------------

// BindSession records the agent session serving the work item (the daemon
// calls it on spawn, and with alive=false when the session closes).
func (r *Runtime) BindSession(ctx context.Context, id string, b SessionBinding) error {
	s, unlock, err := r.openLocked(ctx, id)
	if err != nil {
		return err
	}
	defer r.done(ctx, s, unlock)
	s.st.Session = &b
	return r.save(ctx, s)
}

// Memoizer is implemented by the Artifacts that check-mode chains receive:
// nothing can change the files during a check, so a parse of one file can be
// shared by every hook of the evaluation. Hooks use it when present.
type Memoizer interface {
	Memo(key string, compute func() any) any
}

// readOnly wraps Artifacts for ModeCheck: reads pass through, writes fail,
// and parse results are memoised for the evaluation.
type readOnly struct {
	Artifacts
	mu   sync.Mutex
	memo map[string]any
}

var errReadOnly = errors.New("artifacts are read-only during check")

func (*readOnly) WriteFile(string, []byte) error  { return errReadOnly }
func (*readOnly) AppendFile(string, []byte) error { return errReadOnly }

// Stat implements fs.StatFS (through the wrapped artifacts' own Stat when
// they have one), remembering answers for the evaluation: hooks ask about
// the same files over and over.
func (r *readOnly) Stat(name string) (fs.FileInfo, error) {
	type stat struct {
		fi  fs.FileInfo
		err error
	}
	st := r.Memo("stat\x00"+name, func() any {
		fi, err := fs.Stat(r.Artifacts, name)
		return stat{fi, err}
	}).(stat)
	return st.fi, st.err
}

// ReadFile implements fs.ReadFileFS through the wrapped artifacts.
func (r *readOnly) ReadFile(name string) ([]byte, error) { return fs.ReadFile(r.Artifacts, name) }

// Memo implements Memoizer.
func (r *readOnly) Memo(key string, compute func() any) any {
	r.mu.Lock()
	if v, ok := r.memo[key]; ok {
		r.mu.Unlock()
		return v
	}
	r.mu.Unlock()
	v := compute()
	r.mu.Lock()
	if r.memo == nil {
		r.memo = map[string]any{}
	}
	r.memo[key] = v
	r.mu.Unlock()
	return v
}
