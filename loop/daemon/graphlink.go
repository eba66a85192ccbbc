package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/hooks"
	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/run"
	"github.com/theloop-dev/theloop/sessions"
	"github.com/theloop-dev/theloop/workitem"
)

// graphLink is the seam between dispatch and the process graph (docs/daemon.md §8,
// docs/daemon.md §8). Every entry point runs the guards in order and never
// panics: a failure is logged as graph.link_failed and the dispatch goes
// on. The one error an entry point returns is a decision GitHub could not
// confirm now (errRetryDecision): the dispatch fails and the queue
// redelivers the event. No input makes a work item move forward except
// through the runtime's own hooks, and a human gate sees only the comments
// decisionEvent verified.
//
// It holds what it uses, each passed to newGraphLink (linkDeps), and no
// daemon: the policy it reads (linkConfig), the session registry, manager
// and tmux server (to deliver assignments), the control record, the
// integrations, sink and clock every runtime gets, the decision signer and
// the comment verifier (the gate's check at GitHub), and the event log.
type graphLink struct {
	cfg          atomic.Pointer[linkConfig]
	reg          *sessions.Registry
	mgr          *sessions.Manager
	tmux         *sessions.Tmux
	ctl          *controlStore
	integ        graph.Integrations
	sink         graph.Sink
	clock        graph.Clock
	signer       *loop.Signer // nil: decisions are recorded unsigned
	verifier     CommentVerifier
	commands     run.Runner // a repository's commands, without loopd's credentials
	git          run.Runner // git, for a checkout's origin
	origins      *originReader
	hookObserver func(graph.HookTiming)
	scrub        func(any) any
	record       emitFunc
	logf         func(format string, args ...any)
	observe      func(Observation)

	mu sync.Mutex
	// runtimes caches one runtime per checkout and loop (graph.Runtime
	// has no Close; building one per event would waste the compile).
	runtimes map[string]*graph.Runtime
	// loops remembers which loop a work item in a checkout walks.
	loops map[string]string
	// targets maps checkout + spec id to the work item, for Deliver.
	targets map[string]workitem.Ref
	// specDirs is each checkout's spec directory (relative).
	specDirs map[string]string

	// What loopd's previous recompute of each loop said (recompute.go):
	// obsMu serialises a diff with its commit; observed caches the records
	// kept in observedDir ("" keeps them in memory only).
	obsMu      sync.Mutex
	obsCacheMu sync.Mutex
	observed   map[string]observedLoop
	// obsUnsaved marks the keys whose cached record could not be written.
	obsUnsaved  map[string]bool
	observedDir string
	snapshots   string
	// authority answers routing.authorized (authority.go).
	authority *ingress.Authority
	// pasteOnce is the intake's exactly-once paste (paste.go), set when
	// the intake is built; nil: assignments are pasted at least once.
	pasteOnce atomic.Pointer[pasteOnceFunc]
	// jiraKey names a Jira work item's issue key (nil: none).
	jiraKey func(workitem.Ref) (string, bool)
}

// linkConfig is the part of the daemon's configuration the graph link
// reads; Reload stores a new one (setConfig) under the policy write lock.
type linkConfig struct {
	GraphEnabled                        bool
	GraphSpecDir                        string
	ControlEnabled, RequireStartCommand bool
	AuthorizedUsers                     []string
	ExecuteKeyword                      string
	SessionPerPr                        string
}

// linkDeps are the graph link's collaborators. Every field is required but
// Signer and HookObserver.
type linkDeps struct {
	Registry     *sessions.Registry
	Manager      *sessions.Manager
	Tmux         *sessions.Tmux
	Control      *controlStore
	Integrations graph.Integrations
	Sink         graph.Sink
	Clock        graph.Clock
	Signer       *loop.Signer
	Verifier     CommentVerifier
	Commands     run.Runner
	Git          run.Runner
	HookObserver func(graph.HookTiming)
	Record       emitFunc
	Logf         func(format string, args ...any)
	Observe      func(Observation)
	// ObservedDir keeps what loopd's recompute of each loop said, under
	// the state root ("" in memory only).
	ObservedDir string
	// Scrub cleans what the runtime writes into graph-state.json of
	// credentials (loopd's scrubber; nil: nothing).
	Scrub func(any) any
	// Authority answers routing.authorized (nil: logins only).
	Authority *ingress.Authority
	// SnapshotDir keeps each gate decision's artifacts for the dashboard's
	// "changed since the last decision" (gatecard.go; "": none kept).
	SnapshotDir string
	// JiraKey names a Jira work item's issue key, its spec id (jira.go;
	// nil: no Jira items).
	JiraKey func(workitem.Ref) (string, bool)
}

func (l *graphLink) specDir(cwd string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.specDirs[cwd]; s != "" {
		return s
	}
	return loop.DefaultSpecDir
}

func newGraphLink(cfg linkConfig, deps linkDeps) *graphLink {
	l := &graphLink{
		reg: deps.Registry, mgr: deps.Manager, tmux: deps.Tmux, ctl: deps.Control, integ: deps.Integrations,
		sink: deps.Sink, clock: deps.Clock, signer: deps.Signer, verifier: deps.Verifier,
		commands: deps.Commands, git: deps.Git, origins: newOriginCache(), hookObserver: deps.HookObserver, scrub: deps.Scrub,
		record: deps.Record, logf: deps.Logf, observe: deps.Observe, authority: deps.Authority,
		runtimes: map[string]*graph.Runtime{}, loops: map[string]string{}, targets: map[string]workitem.Ref{}, specDirs: map[string]string{},
		observed: map[string]observedLoop{}, observedDir: deps.ObservedDir, snapshots: deps.SnapshotDir, jiraKey: deps.JiraKey,
	}
	l.setConfig(cfg)
	return l
}

// conf is the policy in force.
func (l *graphLink) conf() *linkConfig { return l.cfg.Load() }

// setConfig replaces the policy (Reload, under the policy write lock).
func (l *graphLink) setConfig(cfg linkConfig) { l.cfg.Store(&cfg) }

// linkAction names a GraphLink entry point (for guards and events).
type linkAction string

const (
	actStart   linkAction = "start"
	actAdvance linkAction = "advance"
	actContext linkAction = "context"
	actClose   linkAction = "close"
)

// skip is a guard's refusal (debug-level; not a failure).
type skip struct{ reason string }

func (s skip) Error() string { return s.reason }

// guarded runs fn under docs/daemon.md §8.2's guards and turns every error and panic
// into graph.link_failed.
func (l *graphLink) guarded(ctx context.Context, act linkAction, item workitem.Ref, cwd string, fn func(rt *graph.Runtime, id string) error) error {
	return l.guardedFor(ctx, act, item, workitem.Ref{}, cwd, fn)
}

// guardedFor is guarded for the work item's outer loop (pr zero) or for a
// pull request's inner loop (pdlc-pr-loop), whose state lives beside the
// work item's in its checkout (<spec>/issue-<n>/pr-loops/…). It returns
// only an errRetryDecision (see graphLink).
func (l *graphLink) guardedFor(ctx context.Context, act linkAction, item, pr workitem.Ref, cwd string, fn func(rt *graph.Runtime, id string) error) (retry error) {
	defer func() {
		if p := recover(); p != nil {
			l.failed(act, item, fmt.Errorf("panic: %v", p))
			retry = nil
		}
	}()
	rt, id, err := l.guard(ctx, act, item, pr, cwd)
	if err == nil {
		err = fn(rt, id)
	}
	var s skip
	var r errRetryDecision
	switch {
	case err == nil:
	case errors.As(err, &s):
		l.record("graph.skipped", graph.LevelDebug, graph.Field{Key: "work_item", Value: item.String()}, graph.Field{Key: "action", Value: string(act)}, graph.Field{Key: "reason", Value: s.reason})
	case errors.As(err, &r):
		// Fail closed: nothing moved. The dispatch fails so the queue
		// delivers the event again, and a real approval is not lost to a
		// GitHub hiccup.
		l.logf("graph link %s for %s: the decision could not be re-read at GitHub; retrying later: %v", act, item, r.error)
		l.record("graph.decision_unverified", graph.LevelWarning, graph.Field{Key: "work_item", Value: item.String()}, graph.Field{Key: "action", Value: string(act)}, graph.Field{Key: "error", Value: r.error.Error()})
		return err
	default:
		l.failed(act, item, err)
	}
	return nil
}

func (l *graphLink) failed(act linkAction, item workitem.Ref, err error) {
	l.logf("graph link %s for %s failed: %v", act, item, err)
	l.record("graph.link_failed", graph.LevelError, graph.Field{Key: "work_item", Value: item.String()}, graph.Field{Key: "action", Value: string(act)}, graph.Field{Key: "error", Value: err.Error()})
}

// guard applies the guards in the reference's order (docs/daemon.md §8.2).
func (l *graphLink) guard(ctx context.Context, act linkAction, item, pr workitem.Ref, cwd string) (*graph.Runtime, string, error) {
	cfg := l.conf()
	// 1. enabled.
	if !cfg.GraphEnabled {
		return nil, "", skip{"disabled"}
	}
	// 2. a spec id (GitHub refs; a Jira item's is its issue key).
	id := l.specID(item)
	if id == "" {
		return nil, "", skip{"no-spec-id"}
	}
	// 3. start required ⇒ the control record says start was requested.
	if cfg.ControlEnabled && cfg.RequireStartCommand {
		ok, err := l.ctl.StartRequested(item)
		if err != nil {
			return nil, "", fmt.Errorf("control record: %w", err)
		}
		if !ok {
			return nil, "", skip{"start-not-requested"}
		}
	}
	// 4. repository identity of the checkout.
	if err := l.checkIdentity(ctx, item, cwd); err != nil {
		return nil, "", err
	}
	// 5. spec dir inside the checkout (OpenRepo refuses one that escapes).
	// 6. loop choice; 9. the runtime.
	var rt *graph.Runtime
	var err error
	if pr.IsZero() {
		rt, err = l.runtime(item, cwd, id)
	} else {
		rt, err = l.prRuntime(item, pr, cwd, id)
	}
	if err != nil {
		if errors.Is(err, loop.ErrUnsafePath) {
			return nil, "", skip{"spec-dir-outside-checkout"}
		}
		return nil, "", err
	}
	// 8. except start and context, the work item's spec dir exists.
	if act != actStart && act != actContext {
		if fi, err := os.Stat(filepath.Join(cwd, filepath.FromSlash(l.specDir(cwd)), id)); err != nil || !fi.IsDir() {
			return nil, "", skip{"no-spec-dir"}
		}
	}
	return rt, id, nil
}

// specID is the work item's spec id: issue-<n> for GitHub, the issue key
// (PROJ-123) for a served Jira project's item, else "".
func (l *graphLink) specID(item workitem.Ref) string {
	if item.Provider == workitem.JiraProvider && l.jiraKey != nil {
		key, _ := l.jiraKey(item)
		return key
	}
	return item.SpecID()
}

var originRe = regexp.MustCompile(`[^/:]+/[^/:]+$`)

// checkIdentity requires the checkout's origin to name the work item's
// owner/repo (host not compared). Unreadable or different ⇒ skip.
func (l *graphLink) checkIdentity(ctx context.Context, item workitem.Ref, cwd string) error {
	u, err := l.origins.url(ctx, cwd)
	if err != nil {
		return skip{"repository-identity-unreadable"}
	}
	u = strings.TrimSuffix(strings.TrimSuffix(u, "/"), ".git")
	u = strings.ReplaceAll(u, ":", "/")
	got := strings.ToLower(originRe.FindString(u))
	want := strings.ToLower(item.Owner + "/" + item.Repo)
	if got != want {
		return skip{fmt.Sprintf("repository-identity-mismatch (origin names %q)", got)}
	}
	return nil
}

func (l *graphLink) runtime(item workitem.Ref, cwd, id string) (*graph.Runtime, error) {
	tkey := cwd + "\x00" + id
	l.mu.Lock()
	l.targets[tkey] = item
	name, known := l.loops[tkey]
	if known {
		if rt := l.runtimes[cwd+"\x00"+name]; rt != nil {
			l.mu.Unlock()
			return rt, nil
		}
	}
	l.mu.Unlock()

	choice := ""
	if rec, _ := l.ctl.Last(item); rec != nil {
		switch rec.Command {
		case ingress.CmdContribute:
			choice = loop.ContributionLoop
		case ingress.CmdDo:
			choice = loop.AdhocLoop
		}
	}
	repo, err := loop.OpenRepo(cwd, l.conf().GraphSpecDir)
	if err != nil {
		return nil, err
	}
	opts := l.options(repo, cwd, id, func(ctx context.Context, workItem, text string) (bool, error) {
		return l.deliverAssignment(ctx, cwd, workItem, text)
	})
	opts.Loop = choice
	rt, err := repo.Runtime(opts)
	if err != nil {
		return nil, err
	}
	name = rt.Graph().Name
	l.mu.Lock()
	defer l.mu.Unlock()
	l.specDirs[cwd] = repo.SpecDir
	l.loops[tkey] = name
	if cached := l.runtimes[cwd+"\x00"+name]; cached != nil {
		return cached, nil
	}
	l.runtimes[cwd+"\x00"+name] = rt
	return rt, nil
}

// options are the runtime options every daemon runtime of the checkout at
// cwd shares — the work item's outer loop and a pull request's inner loop
// differ only in the loop, the PR and where assignments are delivered.
func (l *graphLink) options(repo *loop.Repo, cwd, id string, deliver graph.DeliverFunc) loop.Options {
	opts := loop.Options{
		WorkItem:        id,
		AuthorizedUsers: l.conf().AuthorizedUsers, ExecuteKeyword: l.conf().ExecuteKeyword, SessionPerPr: l.conf().SessionPerPr,
		SpecDir: l.conf().GraphSpecDir,
		// No RepoCommands: the daemon never runs a watched repository's
		// code; verify-tests reads the run the agent's claim recorded.
		Integrations: l.integ, Commands: loop.Commands{Runner: l.commands, Root: repo.Root},
		Deliver: deliver,
		// The checkout's graph-state.json may hold journal entries the
		// agent wrote: loopd's event log never relogs them (trustedSink).
		Sink: trustedSink{next: l.sink}, Clock: l.clock,
		Warn:         func(w string) { l.logf("%s: %s", cwd, w) },
		HookObserver: l.hookObserver,
		Scrub:        l.scrub,
	}
	// loopd's trust anchor is its own decision-signing key and nothing
	// else (docs/decisions.md §23): a decision that does not verify under
	// it counts for nothing. Without a key, no decision verifies.
	var signer graph.DecisionSigner
	var verifier graph.DecisionVerifier = loop.NewVerifier(nil, "loopd, which holds no decision-signing key")
	if l.signer != nil {
		signer, verifier = l.signer, l.signer.Verifier()
	}
	// The phase selection loopd records is also kept under the state root
	// and trusted over the checkout's copy (frozen.go).
	if l.ctl != nil {
		signer = frozenSigner{store: l.ctl.ps, record: l.record, next: signer}
		verifier = frozenVerifier{store: l.ctl.ps, next: verifier}
	}
	// What a gate decided on is kept for the dashboard (gatecard.go).
	if signer != nil && l.snapshots != "" {
		signer = snapshotSigner{next: signer, store: gateSnapshots{dir: l.snapshots}, record: l.record}
	}
	opts.DecisionSigner, opts.DecisionVerifier = signer, verifier
	return opts
}

// trustedSink is the sink of loopd's runtimes: it drops the events a
// runtime relogs from graph-state.json's journal (the "relogged" field) —
// entries in a file the agent writes, which loopd's event log never
// carries. The transitions they would report are the ones loopd's own
// recompute observes (recompute.go).
type trustedSink struct{ next graph.Sink }

func (s trustedSink) Emit(e graph.LogEvent) {
	for _, f := range e.Fields {
		if f.Key == "relogged" {
			return
		}
	}
	if s.next != nil {
		s.next.Emit(e)
	}
}

// prRepo is the --pr-repo of a pull request in another repository than the
// work item ("" for the same repository).
func prRepo(item, pr workitem.Ref) string {
	if sameRepo(item, pr) {
		return ""
	}
	return pr.Owner + "/" + pr.Repo
}

// prRuntime builds (once per checkout and pull request) the runtime of a
// pull request's inner loop, rooted at the work item's checkout. Its
// assignments go to the PR's own session.
func (l *graphLink) prRuntime(item, pr workitem.Ref, cwd, id string) (*graph.Runtime, error) {
	key := cwd + "\x00pr\x00" + prKey(pr)
	l.mu.Lock()
	if rt := l.runtimes[key]; rt != nil {
		l.mu.Unlock()
		return rt, nil
	}
	l.mu.Unlock()
	repo, err := loop.OpenRepo(cwd, l.conf().GraphSpecDir)
	if err != nil {
		return nil, err
	}
	opts := l.options(repo, cwd, id, func(ctx context.Context, _, text string) (bool, error) {
		return l.deliverToPR(ctx, item, pr, text)
	})
	opts.PR, opts.PRRepo = pr.Number, prRepo(item, pr)
	rt, err := repo.Runtime(opts)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.specDirs[cwd] = repo.SpecDir
	if cached := l.runtimes[key]; cached != nil {
		return cached, nil
	}
	l.runtimes[key] = rt
	return rt, nil
}

// prStore is the store of a pull request's inner-loop state.
func (l *graphLink) prStore(item, pr workitem.Ref, cwd string) *loop.FileStore {
	origin := ""
	if repo, err := loop.OpenRepo(cwd, l.conf().GraphSpecDir); err == nil {
		origin = repo.Harness.OriginRepo()
	}
	sub, err := loop.PRLoopSubPath(prRepo(item, pr), origin, pr.Number)
	if err != nil {
		sub = "pr-loops/invalid" // refused by the store's own check below
	}
	return loop.NewStore(cwd, l.specDir(cwd), loop.WithStateSubPath(sub))
}

// store is the store of a loop's state: the work item's outer loop when
// pr is zero, else the pull request's inner loop.
func (l *graphLink) store(item, pr workitem.Ref, cwd string) *loop.FileStore {
	if pr.IsZero() {
		return loop.NewStore(cwd, l.specDir(cwd))
	}
	return l.prStore(item, pr, cwd)
}

// deliverToPR pastes an inner-loop assignment into the PR's own session
// (false when it has none live: the hook skips).
func (l *graphLink) deliverToPR(ctx context.Context, item, pr workitem.Ref, text string) (bool, error) {
	rec, err := l.reg.Get(pr)
	if err != nil || rec.Status != sessions.StatusActive || rec.Parent != item {
		return false, nil
	}
	if parent, err := l.reg.Get(item); err == nil {
		if rt, err := l.prRuntime(item, pr, parent.Cwd, item.SpecID()); err != nil || !l.pasteAllowed(ctx, rt, pr, parent.Cwd, item.SpecID(), text) {
			return false, nil
		}
	} else {
		return false, nil
	}
	if lv, _ := l.tmux.Probe(ctx, rec.TmuxName); lv != sessions.LivenessLive && lv != sessions.LivenessUnknown {
		return false, nil
	}
	var res sessions.DeliveryResult
	pasted, err := l.pasteAssignment(ctx, pr, rec, text, func(full string) error {
		var err error
		text = full
		res, err = l.mgr.Deliver(ctx, pr, full)
		return err
	})
	if err != nil {
		l.record("graph.assignment_failed", graph.LevelWarning, graph.Field{Key: "work_item", Value: item.String()}, graph.Field{Key: "pull_request", Value: pr.String()}, graph.Field{Key: "error", Value: err.Error()})
		return false, err
	}
	if !pasted {
		return true, nil // an earlier attempt's paste is in the session (paste.go)
	}
	l.observe(Observation{Kind: KindPaste, Name: "graph.assignment", WorkItem: pr.String(), DeliveryID: pasteStepOf(ctx), Text: text, Fields: map[string]any{"tmux_target": res.Record.TmuxName, "work_item": item.String()}})
	l.record("graph.assignment_delivered", graph.LevelInfo, graph.Field{Key: "work_item", Value: item.String()}, graph.Field{Key: "pull_request", Value: pr.String()}, graph.Field{Key: "tmux_target", Value: res.Record.TmuxName})
	return true, nil
}

// onPRSpawn starts the pull request's inner loop (idempotent) and binds
// its session.
func (l *graphLink) onPRSpawn(ctx context.Context, item, pr workitem.Ref, cwd, sessionID string) {
	_ = l.guardedFor(ctx, actStart, item, pr, cwd, func(rt *graph.Runtime, id string) error {
		if _, err := rt.Start(ctx, id); err != nil {
			return err
		}
		alive := true
		return rt.BindSession(ctx, id, graph.SessionBinding{ID: sessionID, Runner: "tmux", Alive: &alive})
	})
}

// onPRClose marks the PR session's binding dead and, when the pull request
// merged, forces its inner loop to complete (unless unstarted or already
// complete), recorded with the reason naming the PR.
func (l *graphLink) onPRClose(ctx context.Context, item, pr workitem.Ref, cwd, sessionID string, merged bool) {
	_ = l.guardedFor(ctx, actClose, item, pr, cwd, func(rt *graph.Runtime, id string) error {
		st, err := l.prStore(item, pr, cwd).Load(ctx, id)
		if errors.Is(err, graph.ErrNoState) {
			return nil
		}
		if err != nil {
			return err
		}
		if sessionID != "" {
			alive := false
			if err := rt.BindSession(ctx, id, graph.SessionBinding{ID: sessionID, Runner: "tmux", Alive: &alive}); err != nil {
				return err
			}
		}
		if !merged || st.CurrentNode == "" {
			return nil
		}
		if n, ok := rt.Graph().Node(st.CurrentNode); ok && n.Terminal {
			return nil
		}
		for _, n := range rt.Graph().Nodes() {
			if n.Terminal {
				_, err := rt.Force(ctx, id, graph.ForceRequest{To: n.ID, Reason: fmt.Sprintf("pull request %s merged", pr), Actor: "the-loop"})
				return err
			}
		}
		return nil
	})
}

// deliverAssignment is loop.Options.Deliver: it pastes a node's assignment
// into the work item's live session. No live session ⇒ false (the hook
// skips; graph-state.json stays the truth).
func (l *graphLink) deliverAssignment(ctx context.Context, cwd, id, text string) (bool, error) {
	l.mu.Lock()
	item, ok := l.targets[cwd+"\x00"+id]
	l.mu.Unlock()
	if !ok {
		return false, nil
	}
	rec, err := l.reg.Get(item)
	if err != nil || rec.Status != sessions.StatusActive {
		return false, nil
	}
	if lv, _ := l.tmux.Probe(ctx, rec.TmuxName); lv != sessions.LivenessLive && lv != sessions.LivenessUnknown {
		return false, nil
	}
	// Only the recomputed current node's assignment (or one a gate routed
	// back to) is pasted (docs/decisions.md §23).
	if rt, err := l.runtime(item, cwd, id); err != nil || !l.pasteAllowed(ctx, rt, item, cwd, id, text) {
		return false, nil
	}
	var res sessions.DeliveryResult
	pasted, err := l.pasteAssignment(ctx, item, rec, text, func(full string) error {
		var err error
		text = full
		res, err = l.mgr.Deliver(ctx, item, full)
		return err
	})
	if err != nil {
		l.record("graph.assignment_failed", graph.LevelWarning, graph.Field{Key: "work_item", Value: item.String()}, graph.Field{Key: "error", Value: err.Error()})
		return false, err
	}
	if !pasted {
		return true, nil // an earlier attempt's paste is in the session (paste.go)
	}
	l.observe(Observation{Kind: KindPaste, Name: "graph.assignment", WorkItem: item.String(), DeliveryID: pasteStepOf(ctx), Text: text, Fields: map[string]any{"tmux_target": res.Record.TmuxName}})
	l.record("graph.assignment_delivered", graph.LevelInfo, graph.Field{Key: "work_item", Value: item.String()}, graph.Field{Key: "tmux_target", Value: res.Record.TmuxName})
	return true, nil
}

// adopt writes a default harness config naming the work item's repository
// when the checkout has none, so the graph's hooks can address the ticket
// (docs/daemon.md §8.4). Only for armed items whose checkout passed the
// identity check, never for the contribution loop.
func (l *graphLink) adopt(ctx context.Context, item workitem.Ref, cwd string) {
	if !l.conf().GraphEnabled || l.specID(item) == "" {
		return
	}
	for _, f := range []string{loop.HarnessConfigFile, loop.LegacyHarnessConfigFile} {
		if _, err := os.Stat(filepath.Join(cwd, f)); err == nil {
			return
		}
	}
	if rec, _ := l.ctl.Last(item); rec != nil && rec.Command == ingress.CmdContribute {
		return
	}
	if l.checkIdentity(ctx, item, cwd) != nil {
		return
	}
	body := fmt.Sprintf("# written by loopd (the-loop's default harness config)\nworkflow:\n  specDir: %s\nticketing:\n  github:\n    owner: %s\n    repo: %s\n", loop.DefaultSpecDir, item.Owner, item.Repo)
	if key := l.specID(item); item.Provider == workitem.JiraProvider {
		project, _, _ := strings.Cut(key, "-")
		body += "  jira:\n    project: " + project + "\n"
	}
	p := filepath.Join(cwd, loop.HarnessConfigFile)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		l.failed("adopt", item, err)
		return
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		l.failed("adopt", item, err)
		return
	}
	l.record("harness.config_scaffolded", graph.LevelInfo, graph.Field{Key: "work_item", Value: item.String()}, graph.Field{Key: "path", Value: path.Join(".the-loop", "harness-config.yaml")})
}

// start enters the work item's graph (idempotent) before its session is
// spawned, so the spawn prompt carries the node the item is at and its
// assignment: the first node's entry chain finds no live session and
// pastes nothing, and the agent never reads "NOT ENTERED YET" followed by
// its node in a second paste. When the start node is a human gate it is
// evaluated once with the spawning event's comments.
func (l *graphLink) start(ctx context.Context, item workitem.Ref, cwd string, ev *ingress.Event) error {
	return l.guarded(ctx, actStart, item, cwd, func(rt *graph.Runtime, id string) error {
		rep, err := rt.Start(ctx, id)
		if err != nil || rep == nil || ev == nil {
			if err == nil {
				l.rebase(ctx, rt, item, workitem.Ref{}, cwd, id, rep, true)
			}
			return err
		}
		if n, ok := rt.Graph().Node(rep.CurrentNode); ok && n.IsHuman() {
			// The event that started the item may decide its first node:
			// that node was entered because of it, after it was made.
			gev, err := l.decisionEvent(ctx, item, item, ev, time.Time{}, gatedPaths(n, l.specDir(cwd), id))
			if err != nil {
				return err
			}
			l.rebase(ctx, rt, item, workitem.Ref{}, cwd, id, rep, true)
			step, err := rt.Advance(ctx, id, gev)
			if err == nil {
				l.rebase(ctx, rt, item, workitem.Ref{}, cwd, id, step, false)
			}
			return err
		}
		l.rebase(ctx, rt, item, workitem.Ref{}, cwd, id, rep, true)
		return nil
	})
}

// onSpawn starts the work item's graph (idempotent: start normally ran
// before the spawn) and binds the session.
func (l *graphLink) onSpawn(ctx context.Context, item workitem.Ref, cwd, sessionID string, ev *ingress.Event) error {
	if err := l.start(ctx, item, cwd, ev); err != nil {
		return err
	}
	return l.guarded(ctx, actStart, item, cwd, func(rt *graph.Runtime, id string) error {
		alive := true
		return rt.BindSession(ctx, id, graph.SessionBinding{ID: sessionID, Runner: "tmux", Alive: &alive})
	})
}

// spawnContext is the context of a work item about to be spawned: its
// graph context with the current node's assignment (what the node's
// deliver-assignment hook would have pasted).
func (l *graphLink) spawnContext(ctx context.Context, item workitem.Ref, cwd string) *graphContext {
	var out *graphContext
	_ = l.guarded(ctx, actContext, item, cwd, func(rt *graph.Runtime, id string) error {
		gc, err := l.readContext(ctx, rt, id, cwd, loop.NewStore(cwd, l.specDir(cwd)))
		if gc != nil && gc.Node != nil && gc.Status != "pending" {
			gc.Assignment = hooks.RenderAssignment(graph.WorkItem{ID: id, Ref: item.String()}, gc.Node, gc.Surface, 0, "")
		}
		out = gc
		return err
	})
	return out
}

// onEvent advances a loop with the event's comments and returns the step
// (nil when skipped or failed): the work item's outer loop when pr is zero,
// else the pull request's inner loop.
//
// Only a human node is evaluated: an event can decide a gate, but an agent
// node moves when the agent claims its work (`loopctl graph complete`).
// Evaluating an agent node on every comment would count each unfinished
// exit chain as a failed attempt, and the same block twice in a row
// escalates (docs/decisions.md §3) — two comments while the agent works would park
// the work item.
func (l *graphLink) onEvent(ctx context.Context, item, pr workitem.Ref, cwd string, ev *ingress.Event) (*graph.StepReport, error) {
	on := item // the loop's own item: the work item, or the inner loop's PR
	if !pr.IsZero() {
		on = pr
	}
	var out *graph.StepReport
	err := l.guardedFor(ctx, actAdvance, item, pr, cwd, func(rt *graph.Runtime, id string) error {
		st, err := l.store(item, pr, cwd).Load(ctx, id)
		if errors.Is(err, graph.ErrNoState) {
			return skip{"not-started"}
		}
		if err != nil {
			return err
		}
		if n, ok := rt.Graph().Node(st.CurrentNode); ok && !n.IsHuman() {
			return skip{"agent-node"}
		}
		// The pointer is the agent's word: loopd decides a gate only where
		// its own recompute has the work item (docs/decisions.md §23).
		rc, err := l.recompute(ctx, rt, id, cwd)
		if err != nil {
			return err
		}
		if rc.cur.ID != st.CurrentNode {
			l.record(EventClaimRefused, graph.LevelWarning, append([]graph.Field{{Key: "work_item", Value: on.String()}, {Key: "what", Value: "gate event"},
				{Key: "asked_node", Value: st.CurrentNode}, {Key: "reason", Value: "graph-state.json's pointer is not where loopd's recompute has the work item; the gate is not decided"}}, recomputeFields(rc)...)...)
			return skip{"pointer-disagrees-with-recompute"}
		}
		n, _ := rt.Graph().Node(st.CurrentNode)
		gev, err := l.decisionEvent(ctx, item, on, ev, gateNotBefore(st), gatedPaths(n, l.specDir(cwd), id))
		if err != nil {
			return err
		}
		rep, err := rt.Advance(ctx, id, gev)
		if errors.Is(err, graph.ErrNotStarted) {
			return skip{"not-started"}
		}
		if err == nil {
			l.rebase(ctx, rt, item, pr, cwd, id, rep, false)
		}
		out = rep
		return err
	})
	return out, err
}

// onClose marks the bound session dead.
func (l *graphLink) onClose(ctx context.Context, item workitem.Ref, cwd, sessionID string) {
	_ = l.guarded(ctx, actClose, item, cwd, func(rt *graph.Runtime, id string) error {
		alive := false
		err := rt.BindSession(ctx, id, graph.SessionBinding{ID: sessionID, Runner: "tmux", Alive: &alive})
		if errors.Is(err, graph.ErrNoState) {
			return nil
		}
		return err
	})
}

// Graph context (docs/daemon.md §8.3).

// graphContext is what the prompt's $graph_context block says. It holds
// the-loop's own state only, never payload text.
type graphContext struct {
	ID       string
	Loop     string
	Node     *graph.Node
	Status   string // pending, in-progress, waiting, parked, blocked, escalated, complete
	Reason   string
	Messages []string
	// Verdict is set when the gate was consulted before rendering.
	Verdict string
	Surface string
	// Assignment is the current node's assignment, carried by the spawn
	// prompt (spawnContext); "" in an event prompt.
	Assignment string
}

func (c *graphContext) atHumanGate() bool {
	return c != nil && c.Node != nil && c.Node.IsHuman() && (c.Status == "waiting" || c.Status == "parked")
}

// context reads a loop's graph context (nil when unknown): the work
// item's outer loop when pr is zero, else the pull request's inner loop.
// Before the loop starts it is pending.
func (l *graphLink) context(ctx context.Context, item, pr workitem.Ref, cwd string) *graphContext {
	var out *graphContext
	_ = l.guardedFor(ctx, actContext, item, pr, cwd, func(rt *graph.Runtime, id string) error {
		gc, err := l.readContext(ctx, rt, id, cwd, l.store(item, pr, cwd))
		out = gc
		return err
	})
	return out
}

// readContext reads a loop's context from its runtime and store.
func (l *graphLink) readContext(ctx context.Context, rt *graph.Runtime, id, cwd string, store *loop.FileStore) (*graphContext, error) {
	gc := &graphContext{ID: id, Loop: rt.Graph().Name}
	rep, err := rt.Status(ctx, id, false)
	if errors.Is(err, graph.ErrNoState) || err == nil && rep != nil && rep.CurrentNode == "" {
		gc.Status = "pending"
		return gc, nil
	}
	if err != nil {
		return nil, err
	}
	st, _ := store.Load(ctx, id)
	cur := rep.CurrentNode
	if st != nil && st.CurrentNode != "" {
		cur = st.CurrentNode
	} else if st == nil || st.CurrentNode == "" {
		gc.Status = "pending"
		return gc, nil
	}
	// The pointer is the agent's word: the context (and the assignment a
	// spawn carries) is never further than loopd's recompute has the work
	// item (docs/decisions.md §23).
	if rc, err := l.recompute(ctx, rt, id, cwd); err != nil {
		return nil, err
	} else if rc.beyond(cur) {
		l.record(EventClaimRefused, graph.LevelWarning, append([]graph.Field{{Key: "work_item", Value: id}, {Key: "what", Value: "context"},
			{Key: "asked_node", Value: cur}, {Key: "reason", Value: "graph-state.json's pointer is beyond loopd's recompute; the context says where the recompute has the work item"}}, recomputeFields(rc)...)...)
		cur = rc.cur.ID
		if rep, err = rt.Status(ctx, id, true); err != nil {
			return nil, err
		}
		rep.Parked = nil
	}
	n, ok := rt.Graph().Node(cur)
	if !ok {
		return nil, fmt.Errorf("current node %q is not in %s", cur, rt.Graph().Name)
	}
	gc.Node = n
	if st != nil {
		gc.Surface = st.Surface
	}
	nr, _ := rep.Node(cur)
	gc.Messages = nr.Messages
	switch {
	case rep.Parked != nil && rep.Parked.Node == cur && rep.Parked.Escalated:
		gc.Status, gc.Reason = "escalated", rep.Parked.Reason
	case rep.Parked != nil && rep.Parked.Node == cur && n.IsHuman():
		gc.Status, gc.Reason = "waiting", rep.Parked.Reason
	case rep.Parked != nil && rep.Parked.Node == cur:
		gc.Status, gc.Reason = "parked", rep.Parked.Reason
	case n.Terminal && nr.Status == graph.StatusPass:
		gc.Status = "complete"
	case n.IsHuman():
		gc.Status = "waiting"
	case nr.Status == graph.StatusBlock:
		gc.Status = "blocked"
	default:
		gc.Status = "in-progress"
	}
	return gc, nil
}

// rebind binds a respawned session (no event: the gate is not re-read).
func (l *graphLink) rebind(ctx context.Context, item workitem.Ref, cwd, sessionID string) {
	_ = l.guarded(ctx, actStart, item, cwd, func(rt *graph.Runtime, id string) error {
		alive := true
		err := rt.BindSession(ctx, id, graph.SessionBinding{ID: sessionID, Runner: "tmux", Alive: &alive})
		if errors.Is(err, graph.ErrNoState) {
			return nil
		}
		return err
	})
}

// Gate sessions (R4.7, R7.3, R7.4).

// Resolutions of a human gate's session, as graph.gate_session_bound
// reports them.
const (
	gateSessionInherited = "inherited"            // the producer's live session serves the gate
	gateSessionResumed   = "resumed"              // the producer's conversation, reopened after it died
	gateSessionFresh     = "fresh-with-artifacts" // a fresh conversation seeded with the artifacts
	gateSessionNew       = "new"                  // the gate declares no inheritance
)

// bindGateSession runs when an event reaches a work item waiting at a human
// gate, before the gate is consulted. A gate that declares
// `session: inherit` is served by the session of the node that produced
// what it reviews — the one graph-state.json records as bound. When that
// session is live, it is the one: the verdict, and after changes requested
// the producer's next assignment, are pasted into it. When it has died,
// it is brought back first (the conversation resumed, else a fresh one
// seeded with the work item's artifacts, recorded as a fallback — it never
// blocks), so what the gate decides lands in the bound session and not in
// a session nobody reads; the state is rebound to it. The resolution is
// reported as graph.gate_session_bound. It never fails the dispatch:
// a problem is reported and delivery goes on as usual.
func (l *graphLink) bindGateSession(ctx context.Context, item workitem.Ref, rec sessions.Record, gc *graphContext) {
	if gc == nil || gc.Node == nil {
		return
	}
	fields := []graph.Field{{Key: "work_item", Value: item.String()}, {Key: "node", Value: gc.Node.ID}}
	if gc.Node.Session != graph.SessionInherit {
		l.record("graph.gate_session_bound", graph.LevelInfo, append(fields, graph.Field{Key: "resolution", Value: gateSessionNew})...)
		return
	}
	producer := ""
	if st, err := loop.NewStore(rec.Cwd, l.specDir(rec.Cwd)).Load(ctx, gc.ID); err == nil && st.Session != nil {
		producer = st.Session.ID
	}
	fields = append(fields, graph.Field{Key: "producer_session_id", Value: producer})
	resolution, bound := gateSessionInherited, rec.SessionID
	if lv, _ := l.tmux.Probe(ctx, rec.TmuxName); lv != sessions.LivenessLive && lv != sessions.LivenessUnknown {
		res, err := l.mgr.Respawn(ctx, item, "")
		if err != nil {
			l.record("graph.gate_session_failed", graph.LevelWarning, append(fields, graph.Field{Key: "error", Value: err.Error()})...)
			return
		}
		switch {
		case res.Fallback != nil:
			resolution = gateSessionFresh
		case res.Resumed:
			resolution = gateSessionResumed
		}
		bound = res.Record.SessionID
	}
	if bound != producer {
		l.rebind(ctx, item, rec.Cwd, bound)
	}
	l.record("graph.gate_session_bound", graph.LevelInfo, append(fields, graph.Field{Key: "resolution", Value: resolution}, graph.Field{Key: "session_id", Value: bound})...)
}

// warnPhases is R9.3 at loopd's start: for each checkout the daemon
// already serves (its session records), a workflow.phases list that
// differs from the work-item loop is logged and reported as
// harness.phases_diverge, naming the differing phases. Checkouts opened
// later are told the same when their runtime is built (loop.Options.Warn).
func (l *graphLink) warnPhases(cwds []string) {
	g, err := loop.ShippedGraph(loop.WorkItemLoop)
	if err != nil {
		return
	}
	seen := map[string]bool{}
	for _, cwd := range cwds {
		if cwd == "" || seen[cwd] {
			continue
		}
		seen[cwd] = true
		repo, err := loop.OpenRepo(cwd, l.conf().GraphSpecDir)
		if err != nil {
			continue
		}
		for _, w := range repo.Harness.PhaseWarnings(g) {
			l.logf("%s: warning: %s", cwd, w)
			l.record("harness.phases_diverge", graph.LevelWarning, graph.Field{Key: "checkout", Value: cwd}, graph.Field{Key: "warning", Value: w})
		}
	}
}

// artifactNames names the work item's artifacts as its graph declares
// them, in the graph's node order: each node's produces (every
// alternative of "requirements.md|bugfix.md") and the files its hooks
// validate (execution-log.md). A fresh session replacing a lost one is
// pointed at those that exist (sessions.ManagerConfig.Artifacts); nil when
// the graph cannot be opened (the manager then lists the spec directory).
func (l *graphLink) artifactNames(rec sessions.Record) []string {
	id := l.specID(rec.Item)
	if id == "" || rec.Cwd == "" || !rec.Parent.IsZero() {
		return nil
	}
	rt, err := l.runtime(rec.Item, rec.Cwd, id)
	if err != nil {
		return nil
	}
	var names []string
	seen := map[string]bool{}
	add := func(s string) {
		for _, alt := range strings.Split(s, "|") {
			if alt = strings.TrimSpace(alt); alt != "" && !seen[alt] {
				seen[alt] = true
				names = append(names, alt)
			}
		}
	}
	for _, n := range rt.Graph().Nodes() {
		for _, p := range n.Produces {
			add(p)
		}
		for _, h := range append(append([]graph.BoundHook(nil), n.Entry...), n.Exit...) {
			if v, ok := h.Params["validates"].(string); ok {
				add(v)
			}
		}
	}
	return names
}
