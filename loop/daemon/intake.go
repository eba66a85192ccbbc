package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/hooks"
	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/integrations"
	"github.com/theloop-dev/theloop/loop/daemon/dispatch"
	"github.com/theloop-dev/theloop/ops"
	"github.com/theloop-dev/theloop/run"
	"github.com/theloop-dev/theloop/sessions"
	"github.com/theloop-dev/theloop/workitem"
)

// intake applies one routed event (docs/daemon.md §6): control commands, the
// armed check, spawn, delivery to the live session with the gate consulted
// first, close. It is the dispatcher's Handler and is idempotent: every
// step that is not naturally idempotent leaves a marker in the queue's
// handled bucket (delivery id + step), so a redelivery after a crash skips
// what already happened.
//
// It holds what it uses, each passed to newIntake (intakeDeps), and no
// daemon: the policy it reads (intakeConfig), the session registry, the
// manager and the workspaces, the graph link, the control record, the
// queue's handled marks, the integrations, and the event log and observer
// it reports to.
type intake struct {
	cfg    atomic.Pointer[intakeConfig]
	reg    *sessions.Registry
	mgr    *sessions.Manager
	ws     *sessions.Workspaces // nil: every session starts in cfg.SpawnWorkdir
	link   *graphLink
	ctl    *controlStore
	marks  handledMarks
	integ  graph.Integrations
	tmux   sessions.TmuxConfig // the server agents run on (the attach command)
	attach func(name string) string
	git    run.Runner // git (none runs in an agent's checkout: see branchOf)
	now    func() time.Time
	clone  func(workitem.Ref, *ingress.Event) string // where to clone a repository from
	// harnessOf names the harness a spawn for an event runs ("": default).
	harnessOf func(*ingress.Event) string
	record    emitFunc
	observe   func(Observation)

	// links caches branch-linkage answers (linkage.go).
	links *linkageCache
	// prs maps linked pull requests to their work items (prsessions.go).
	prs prIndex
	// authority answers routing.authorized (authority.go); nil: logins only.
	authority *ingress.Authority
	// reactor posts reactions in the background (reactions.go).
	reactor *reactor
	// intents and history make pastes exactly-once (paste.go); faults
	// injects a crash at a paste's fault points (tests only).
	intents intentStore
	history sessionHistory
	faults  atomic.Pointer[func(point, key string) error]
}

// intakeConfig is the part of the daemon's configuration the intake reads.
// Reload stores a new one (setConfig) under the policy write lock every
// dispatch holds for reading, so a dispatch sees one policy throughout.
type intakeConfig struct {
	ControlEnabled, RequireStartCommand bool
	AuthorizedUsers                     []string
	SpawnOnUnmatched                    string
	Reactions                           Reactions
	AnnounceEnabled                     bool
	InteractionMode                     string
	PromptTemplate, SpawnPromptTemplate string
	SessionPerPr                        string
	GraphEnabled                        bool
	// SpawnWorkdir is where a session starts without a workspace.
	SpawnWorkdir        string
	KeepCheckoutOnClose bool
	// Close is what closing a session leaves behind.
	Close sessions.CloseOptions
}

// intakeDeps are the intake's collaborators. Every field is required but
// Workspaces (nil: no per-item checkouts).
type intakeDeps struct {
	Registry   *sessions.Registry
	Manager    *sessions.Manager
	Workspaces *sessions.Workspaces
	Link       *graphLink
	Control    *controlStore
	// Marks is the queue's handled bucket; Intents records pastes' intents
	// in it, and History reads a session's history (paste.go). nil Intents:
	// pastes are at-least-once.
	Marks        handledMarks
	Intents      intentStore
	History      sessionHistory
	Integrations graph.Integrations
	Tmux         sessions.TmuxConfig
	// Attach is the command that attaches an operator to a session (nil:
	// the plain tmux attach of Tmux's server).
	Attach   func(name string) string
	Git      run.Runner
	Now      func() time.Time
	CloneURL func(workitem.Ref, *ingress.Event) string
	// HarnessFor names the harness a spawn for ev runs ("" = the
	// default): the event's harness label, else the repository's.
	HarnessFor func(*ingress.Event) string
	// Record writes to the event log; Observe feeds the observer and the
	// dashboard.
	Record  emitFunc
	Observe func(Observation)
	// Authority answers routing.authorized (nil: logins only).
	Authority *ingress.Authority
}

// handledMarks is the queue's record of the steps done per delivery
// (*queue.Queue).
type handledMarks interface {
	Handled(ctx context.Context, key string) (bool, error)
	MarkHandled(ctx context.Context, key string) error
}

// emitFunc writes one event to the daemon's event log.
type emitFunc func(name string, level graph.Level, fields ...graph.Field)

func newIntake(cfg intakeConfig, deps intakeDeps) *intake {
	in := &intake{
		reg: deps.Registry, mgr: deps.Manager, ws: deps.Workspaces, link: deps.Link, ctl: deps.Control,
		marks: deps.Marks, integ: deps.Integrations, tmux: deps.Tmux, attach: deps.Attach, git: deps.Git, now: deps.Now,
		clone: deps.CloneURL, record: deps.Record, observe: deps.Observe,
		links: newLinkageCache(linkageCacheSize), authority: deps.Authority,
	}
	in.reactor = newReactor(reactionsInFlight, deps.Record, deps.Now)
	in.intents, in.history = deps.Intents, deps.History
	in.harnessOf = deps.HarnessFor
	if in.harnessOf == nil {
		in.harnessOf = func(*ingress.Event) string { return "" }
	}
	in.setConfig(cfg)
	if in.link != nil && in.intents != nil {
		once := pasteOnceFunc(in.pasteOnce)
		in.link.pasteOnce.Store(&once)
	}
	return in
}

// close stops the intake's background work (reactions in flight) and
// waits for it. The dispatcher must be stopped first.
func (in *intake) close() { in.reactor.close() }

// conf is the policy in force.
func (in *intake) conf() *intakeConfig { return in.cfg.Load() }

// setConfig replaces the policy (Reload, under the policy write lock).
func (in *intake) setConfig(cfg intakeConfig) { in.cfg.Store(&cfg) }

var _ dispatch.Handler = (*intake)(nil)

// Step markers.
const (
	stepSpawn    = "#spawn"
	stepPaste    = "#paste"
	stepAnnounce = "#announce"
	// stepPRSpawn: this event is spawning a PR's own session.
	stepPRSpawn = "#pr-spawn"
	// stepPRAnnounce: a PR's own session was announced on the PR.
	stepPRAnnounce = "#pr-announce"
)

func (in *intake) done(ctx context.Context, ev *ingress.Event, step string) bool {
	ok, _ := in.marks.Handled(ctx, ev.DeliveryID+step)
	return ok
}

func (in *intake) mark(ctx context.Context, ev *ingress.Event, step string) error {
	return in.marks.MarkHandled(ctx, ev.DeliveryID+step)
}

func (in *intake) emit(name string, level graph.Level, item workitem.Ref, ev *ingress.Event, fields ...graph.Field) {
	fs := []graph.Field{{Key: "work_item", Value: item.String()}}
	if ev != nil { // nil: a CLI-issued command
		fs = append(fs, graph.Field{Key: "delivery_id", Value: ev.DeliveryID}, graph.Field{Key: "gh_event", Value: ev.Event})
	}
	in.record(name, level, append(fs, fields...)...)
}

// dropped reports an event dropped by policy and returns
// dispatch.ErrNoEffect (acknowledged, no handled record).
func (in *intake) dropped(item workitem.Ref, ev *ingress.Event, reason string) error {
	in.emit("dispatch.dropped", graph.LevelInfo, item, ev, graph.Field{Key: "reason", Value: reason})
	return dispatch.ErrNoEffect
}

// Handle implements dispatch.Handler.
func (in *intake) Handle(ctx context.Context, ev *ingress.Event) error {
	ctx = withPasteStep(ctx, ev.DeliveryID) // an assignment pasted on its way is pasted once (paste.go)
	if in.verifyLinkage(ctx, ev) && len(ev.WorkItems) == 0 {
		return in.dropped(workitem.Ref{}, ev, "work-item-not-found")
	}
	item, rec, live, ok := in.target(ev)
	if !ok {
		return in.dropped(workitem.Ref{}, ev, "no-work-item")
	}
	if ok, err := in.admitActor(ctx, item, ev); err != nil || !ok {
		if err != nil {
			return err // GitHub could not say: redelivered later, nothing moved
		}
		return in.dropped(item, ev, string(ingress.DropUnauthorized))
	}
	if c := ev.Control; c != nil && in.conf().ControlEnabled {
		if c.Ambiguous {
			in.emit("control.ambiguous", graph.LevelInfo, item, ev)
			return nil
		}
		if c.Command != ingress.CmdExecute {
			if ok, err := in.authorizedActor(ctx, item, c.Actor); err != nil {
				return err
			} else if !ok {
				in.emit("control.rejected", graph.LevelWarning, item, ev, graph.Field{Key: "command", Value: string(c.Command)}, graph.Field{Key: "reason", Value: "unauthorized-actor"})
				return nil
			}
			return in.applyControl(ctx, item, ev, c)
		}
		in.emit("control.command", graph.LevelInfo, item, ev, graph.Field{Key: "command", Value: string(c.Command)}, graph.Field{Key: "effect", Value: "handed-to-graph"})
	}
	if in.isClose(ev, item) {
		if live {
			in.closeSession(ctx, item, rec, ev, closeReason(ev))
		}
		return nil
	}
	if ev.Event == ingress.KindPullRequest && ev.Action == "closed" {
		// A pull request that is not the work item itself closed: its own
		// session ends, the work item's stays (docs/daemon.md §6.1 step 4). Never spawn
		// for a close.
		if pe, ok := prOf(ev); ok && pe.PR != item {
			if live {
				in.closePR(ctx, item, rec, pe.PR, pe.Merged, ev)
			}
			return nil
		}
	}
	if !live {
		if reason := in.refusal(item, ev, ""); reason != "" {
			return in.dropped(item, ev, reason)
		}
		if ingress.IsPresence(ev) {
			// The reconcile pass found an armed item: start it, but nobody
			// acted, so nothing reacts on the ticket.
			return in.spawn(ctx, item, ev)
		}
		return in.withReactions(ctx, item, ev, func() error { return in.spawn(ctx, item, ev) })
	}
	if in.done(ctx, ev, stepSpawn) {
		// A redelivered spawn: the session this event started is
		// registered; finish what the crash interrupted.
		return in.finishSpawn(ctx, item, rec, ev)
	}
	if ingress.IsPresence(ev) {
		// A restart's reconcile pass saw the item again: that is not an
		// event of the work item, and the live session must not hear it.
		return in.dropped(item, ev, "presence-of-live-session")
	}
	if rec.Status == sessions.StatusPaused {
		return in.dropped(item, ev, "session-paused")
	}
	return in.withReactions(ctx, item, ev, func() error { return in.dispatchTo(ctx, item, rec, ev) })
}

// target is the work item the event is for: the first one with a live
// record, else the first that parses. It also returns that item's record
// and liveness as read (one registry read per work item, not a second one
// for the chosen item).
func (in *intake) target(ev *ingress.Event) (workitem.Ref, sessions.Record, bool, bool) {
	var first workitem.Ref
	var firstRec sessions.Record
	found := false
	for _, r := range ev.WorkItems {
		item, err := r.Canonical()
		if err != nil {
			continue
		}
		// A linked pull request is served by its work item's record.
		owner := in.resolve(item)
		rec, live := in.live(owner)
		if live {
			return owner, rec, true, true
		}
		if owner != item {
			// The work item it was linked to has no live session: the ref
			// may be a work item of its own now (not a PR's own session).
			own, ownLive := in.live(item)
			if ownLive && own.Parent.IsZero() {
				return item, own, true, true
			}
			rec = own
		}
		if !found {
			first, firstRec, found = item, rec, true
		}
	}
	return first, firstRec, false, found
}

// armed applies routing.spawnOnUnmatched.
func (in *intake) armed(ev *ingress.Event) bool {
	switch in.conf().SpawnOnUnmatched {
	case SpawnAlways:
		return true
	case SpawnLabeled:
		return ev.Labeled
	}
	return false
}

// refusal is the reason an unmatched event may not spawn ("" = may),
// docs/daemon.md §6.4; cmd is the control command counting as the start.
func (in *intake) refusal(item workitem.Ref, ev *ingress.Event, cmd ingress.Command) string {
	if !in.armed(ev) {
		return "spawn-policy"
	}
	if item.IsZero() {
		return "no-work-item"
	}
	if in.conf().ControlEnabled && in.conf().RequireStartCommand && !cmd.Spawns() {
		if ok, _ := in.ctl.StartRequested(item); !ok {
			return "awaiting-start"
		}
	}
	return ""
}

// withReactions puts the started reaction on the trigger while fn runs,
// then the completed or error reaction, all in the background (reactions.go):
// the handling never waits for GitHub, and a GitHub that refuses every call
// costs the event its emoji, not the agent its time. Reactions are
// best-effort.
func (in *intake) withReactions(ctx context.Context, item workitem.Ref, ev *ingress.Event, fn func() error) error {
	r := in.conf().Reactions
	var pending *reaction
	if in.reacts(item, ev, r.Started) || in.reacts(item, ev, r.Completed) || in.reacts(item, ev, r.Error) {
		started := r.Started
		if !in.reacts(item, ev, started) {
			started = ""
		}
		pending = in.reactor.start(started, func(ctx context.Context, content string) { in.react(ctx, item, ev, content) })
	}
	err := fn()
	if err != nil {
		pending.finish(r.Error)
		return err
	}
	pending.finish(r.Completed)
	return nil
}

// reacts reports whether react would post content for ev.
func (in *intake) reacts(item workitem.Ref, ev *ingress.Event, content string) bool {
	return in.conf().Reactions.Enabled && content != "" && item.Provider == "github" && ev.Source != ingress.SourceCLI
}

func (in *intake) react(ctx context.Context, item workitem.Ref, ev *ingress.Event, content string) {
	if !in.reacts(item, ev, content) {
		return
	}
	args := map[string]any{"ref": item.String(), "content": content}
	if len(ev.Comments) > 0 && ev.Comments[0].ID != "" {
		args["commentId"] = ev.Comments[0].ID
		if k := ingress.KindOf(ev.Event); k.CommentType == integrations.CommentTypeReviewComment {
			args["commentType"] = k.CommentType
		}
	}
	if _, err := in.integ.Call(ctx, ops.GitHubAddReaction, args); err != nil {
		in.emit("reaction.failed", graph.LevelWarning, item, ev, graph.Field{Key: "content", Value: content}, graph.Field{Key: "error", Value: err.Error()})
		return
	}
	in.emit("reaction.added", graph.LevelDebug, item, ev, graph.Field{Key: "content", Value: content})
}

// workspace prepares the session's checkout.
func (in *intake) workspace(ctx context.Context, item workitem.Ref, ev *ingress.Event) (string, error) {
	if in.ws == nil {
		return in.conf().SpawnWorkdir, nil
	}
	opts := sessions.PrepareOptions{}
	opts.CloneURL = in.clone(item, ev)
	w, err := in.ws.Prepare(ctx, item, opts)
	if err != nil {
		return "", err
	}
	in.emit("workspace.prepared", graph.LevelInfo, item, ev, graph.Field{Key: "cwd", Value: w.Dir}, graph.Field{Key: "reused", Value: w.Reused})
	return w.Dir, nil
}

// spawn starts the work item's session (docs/daemon.md §6.6).
func (in *intake) spawn(ctx context.Context, item workitem.Ref, ev *ingress.Event) error {
	cwd, err := in.workspace(ctx, item, ev)
	if err != nil {
		in.emit("session.spawn_failed", graph.LevelError, item, ev, graph.Field{Key: "error", Value: err.Error()})
		return err
	}
	in.link.adopt(ctx, item, cwd)
	// The graph is entered first, so the spawn prompt names the node and
	// its assignment. A decision that could not be re-read fails the spawn
	// before anything is marked: the queue delivers the event again.
	if err := in.link.start(ctx, item, cwd, ev); err != nil {
		return err
	}
	gc := in.link.spawnContext(ctx, item, cwd)
	prompt := renderPrompt(in.conf().SpawnPromptTemplate, true, promptInput{WorkItem: item.String(), Event: ev, Interaction: in.conf().InteractionMode, Graph: gc})
	// The intent marker goes first: a redelivery that finds a live session
	// after it knows the session is this event's, not a stranger's.
	if err := in.mark(ctx, ev, stepSpawn); err != nil {
		return err
	}
	var res sessions.SpawnResult
	pasted, err := in.pasteOnce(ctx, item, sessions.Record{Item: item, TmuxName: sessions.TmuxName(item)}, ev.DeliveryID+stepPaste, prompt, func(text string) error {
		var err error
		prompt = text
		res, err = in.mgr.Spawn(ctx, sessions.SpawnRequest{Item: item, Harness: in.harnessOf(ev), Cwd: cwd, Prompt: text})
		return err
	})
	if err == nil && !pasted {
		// A session that heard this prompt is running, though its record
		// did not say live when the event came: it is this event's.
		res.Record, err = in.reg.Get(item)
	}
	if err != nil {
		in.emit("session.spawn_failed", graph.LevelError, item, ev, graph.Field{Key: "error", Value: err.Error()})
		return err
	}
	in.observe(Observation{Kind: KindPaste, Name: "spawn-prompt", WorkItem: item.String(), DeliveryID: ev.DeliveryID, Text: prompt,
		Fields: map[string]any{"tmux_target": res.Record.TmuxName}})
	in.emit("dispatch.spawned", graph.LevelInfo, item, ev, graph.Field{Key: "harness_session_id", Value: res.Record.SessionID},
		graph.Field{Key: "tmux_target", Value: res.Record.TmuxName}, graph.Field{Key: "interaction", Value: in.conf().InteractionMode},
		graph.Field{Key: "action", Value: ev.Action})
	if pe, ok := prOf(ev); ok && pe.PR != item {
		// The PR is recorded at the moment the session is spawned.
		in.linkPR(ctx, item, res.Record, pe, ev)
	}
	if err := in.mark(ctx, ev, stepPaste); err != nil {
		return err
	}
	if err := in.link.onSpawn(ctx, item, cwd, res.Record.SessionID, ev); err != nil {
		// The gate's decision could not be confirmed: a redelivery resumes
		// the spawn here (finishSpawn) and consults the gate again.
		return err
	}
	return in.announce(ctx, item, res.Record, ev)
}

// finishSpawn completes a spawn interrupted by a crash: the session (its
// record was written before tmux ran) is brought back if it never came up,
// the graph is started (idempotent) and the announcement posted (once).
func (in *intake) finishSpawn(ctx context.Context, item workitem.Ref, rec sessions.Record, ev *ingress.Event) error {
	in.emit("dispatch.spawn_resumed", graph.LevelInfo, item, ev, graph.Field{Key: "tmux_target", Value: rec.TmuxName})
	if !in.done(ctx, ev, stepPaste) {
		if err := in.link.start(ctx, item, rec.Cwd, ev); err != nil {
			return err
		}
		gc := in.link.spawnContext(ctx, item, rec.Cwd)
		prompt := renderPrompt(in.conf().SpawnPromptTemplate, true, promptInput{WorkItem: item.String(), Event: ev, Interaction: in.conf().InteractionMode, Graph: gc})
		// The spawn may have pasted the prompt before the crash: look for
		// it in the session before pasting it again (paste.go).
		pasted, err := in.pasteOnce(ctx, item, rec, ev.DeliveryID+stepPaste, prompt, func(text string) error {
			res, err := in.mgr.Deliver(ctx, item, text)
			prompt, rec = text, res.Record
			return err
		})
		if err != nil {
			return err
		}
		if pasted {
			in.observe(Observation{Kind: KindPaste, Name: "spawn-prompt", WorkItem: item.String(), DeliveryID: ev.DeliveryID, Text: prompt,
				Fields: map[string]any{"tmux_target": rec.TmuxName}})
		}
		if err := in.mark(ctx, ev, stepPaste); err != nil {
			return err
		}
	}
	if pe, ok := prOf(ev); ok && pe.PR != item {
		rec = in.linkPR(ctx, item, rec, pe, ev)
	}
	if err := in.link.onSpawn(ctx, item, rec.Cwd, rec.SessionID, ev); err != nil {
		return err
	}
	return in.announce(ctx, item, rec, ev)
}

// announce posts the marked session announcement once per spawn. A failed
// post fails the dispatch, so the dispatcher retries it (a redelivered
// spawn resumes at the announcement): a GitHub outage delays it, never
// loses it.
func (in *intake) announce(ctx context.Context, item workitem.Ref, rec sessions.Record, ev *ingress.Event) error {
	if !in.conf().AnnounceEnabled || item.Provider != "github" || in.done(ctx, ev, stepAnnounce) {
		return nil
	}
	body := fmt.Sprintf("the-loop started a %s session for this work item in tmux session `%s`.\n\nWatch or take over on the daemon's host:\n\n```\n%s\n```\n",
		rec.Harness, rec.TmuxName, in.attachCommand(rec.TmuxName))
	if _, err := in.integ.Call(ctx, ops.GitHubAddComment, map[string]any{"ref": item.String(), "body": hooks.Mark(body)}); err != nil {
		if errors.Is(err, integrations.ErrNotFound) {
			// The work item does not exist (a guessed ref): remember it, keep
			// the session, and do not retry what cannot succeed.
			in.markMissing(item)
			in.emit("session.work_item_missing", graph.LevelWarning, item, ev, graph.Field{Key: "tmux_target", Value: rec.TmuxName}, graph.Field{Key: "error", Value: err.Error()})
			return in.mark(ctx, ev, stepAnnounce)
		}
		in.emit("session.announce_failed", graph.LevelWarning, item, ev, graph.Field{Key: "error", Value: err.Error()})
		return fmt.Errorf("announce %s: %w", item, err)
	}
	in.emit("session.announced", graph.LevelInfo, item, ev, graph.Field{Key: "tmux_target", Value: rec.TmuxName})
	return in.mark(ctx, ev, stepAnnounce)
}

// attachCommand is the command that attaches an operator to session name.
func (in *intake) attachCommand(name string) string {
	if in.attach != nil {
		return in.attach(name)
	}
	return attachCommand(in.tmux, name)
}

// attachCommand is the tmux attach command for the configured server.
func attachCommand(t sessions.TmuxConfig, name string) string {
	switch {
	case t.Socket != "":
		return fmt.Sprintf("tmux -L %s attach -t %s", t.Socket, name)
	case t.SocketPath != "":
		return fmt.Sprintf("tmux -S %s attach -t %s", t.SocketPath, name)
	}
	return "tmux attach -t " + name
}

// dispatchTo delivers the event to the live session: the gate first when
// the work item waits at a human gate (so the agent hears the verdict),
// then the rendered event prompt, then — when the gate was not consulted —
// the graph advance (docs/daemon.md §6.5).
func (in *intake) dispatchTo(ctx context.Context, item workitem.Ref, rec sessions.Record, ev *ingress.Event) error {
	cwd := rec.Cwd
	if pe, ok := prOf(ev); ok && pe.PR != item {
		pr := pe.PR
		// Endpoint selection (docs/daemon.md §6.5 step 1, §6.7): a linked PR's event goes
		// to the PR's own session when the work item splits PRs off and the
		// PR has (or can have) one; its inner loop's gate is consulted
		// first. Otherwise it goes to the work item's session below.
		rec = in.linkPR(ctx, item, rec, pe, ev)
		if in.splitsOff(ctx, item, rec, pr) {
			gc, consulted, err := consultGate(in.link.context(ctx, item, pr, cwd),
				func() *graphContext { return in.link.context(ctx, item, pr, cwd) },
				func() (*graph.StepReport, error) { return in.link.onEvent(ctx, item, pr, cwd, ev) })
			if err != nil {
				return err
			}
			if in.done(ctx, ev, stepPaste) || in.done(ctx, ev, stepSpawn) {
				return nil
			}
			handled, err := in.toPREndpoint(ctx, item, rec, pr, ev, gc)
			if err != nil {
				return err
			}
			if handled {
				if !consulted {
					if _, err := in.link.onEvent(ctx, item, pr, cwd, ev); err != nil {
						return err
					}
				}
				return nil
			}
		}
	}
	delivered := in.deliveredAlready(ctx, ev)
	before := in.link.context(ctx, item, workitem.Ref{}, cwd)
	gc, consulted, err := consultGate(before,
		func() *graphContext { return in.link.context(ctx, item, workitem.Ref{}, cwd) },
		func() (*graph.StepReport, error) {
			// The gate's session first (session: inherit binds the
			// producer's), so what the gate decides lands in the bound
			// session.
			in.link.bindGateSession(ctx, item, rec, before)
			return in.link.onEvent(ctx, item, workitem.Ref{}, cwd, ev)
		})
	if err != nil {
		// The decision could not be re-read at GitHub: nothing moved and
		// nothing is pasted; the queue delivers the event again.
		return err
	}
	if delivered() {
		// A redelivery: this event's text is already in the session (or
		// it spawned the session).
		return nil
	}
	prompt := renderPrompt(in.conf().PromptTemplate, false, promptInput{WorkItem: item.String(), Event: ev, Interaction: in.conf().InteractionMode, Graph: gc})
	var res sessions.DeliveryResult
	pasted, err := in.pasteOnce(ctx, item, rec, ev.DeliveryID+stepPaste, prompt, func(text string) error {
		var err error
		prompt = text
		res, err = in.mgr.Deliver(ctx, item, text)
		return err
	})
	if err != nil {
		in.emit("dispatch.failed", graph.LevelWarning, item, ev, graph.Field{Key: "error", Value: err.Error()})
		return err
	}
	if pasted {
		in.observe(Observation{Kind: KindPaste, Name: "event-prompt", WorkItem: item.String(), DeliveryID: ev.DeliveryID, Text: prompt,
			Fields: map[string]any{"tmux_target": res.Record.TmuxName, "respawned": res.Respawn != nil}})
		if res.Respawn != nil {
			in.emit("dispatch.respawned", graph.LevelInfo, item, ev, graph.Field{Key: "resumed", Value: res.Respawn.Resumed},
				graph.Field{Key: "fresh_with_artifacts", Value: res.Respawn.Fallback != nil})
			in.link.rebind(ctx, item, cwd, res.Record.SessionID)
		}
		in.emit("dispatch.succeeded", graph.LevelInfo, item, ev, graph.Field{Key: "via", Value: "tmux"})
	}
	if err := in.mark(ctx, ev, stepPaste); err != nil {
		return err
	}
	if !consulted {
		if _, err := in.link.onEvent(ctx, item, workitem.Ref{}, cwd, ev); err != nil {
			return err
		}
	}
	return nil
}

// deliveredAlready starts reading whether this delivery's text is already
// in the session (#paste) or it spawned the session (#spawn) — a
// redelivery — and returns the wait for the answer. The reads go to the
// queue while the graph is read and its gate consulted (state saves that
// wait on fsync): those steps write no mark, and a delivery is handled by
// one worker at a time (per-item order), so the answer is the one a read
// after them would give.
func (in *intake) deliveredAlready(ctx context.Context, ev *ingress.Event) func() bool {
	ch := make(chan bool, 1) // buffered: an early return leaves no goroutine behind
	go func() { ch <- in.done(ctx, ev, stepPaste) || in.done(ctx, ev, stepSpawn) }()
	return func() bool { return <-ch }
}

// consultGate consults the gate first when the loop waits at a human gate
// (so the agent hears the verdict): advance with the event, re-read the
// context, note the verdict. consulted reports whether it did; an error is
// advance's (a decision to retry later), and then nothing else was done.
func consultGate(gc *graphContext, read func() *graphContext, advance func() (*graph.StepReport, error)) (_ *graphContext, consulted bool, err error) {
	if !gc.atHumanGate() {
		return gc, false, nil
	}
	rep, err := advance()
	if err != nil {
		return gc, true, err
	}
	if after := read(); after != nil {
		gc = after
	}
	if rep != nil && gc != nil {
		gc.Verdict = verdict(rep)
	}
	return gc, true, nil
}

// verdict describes a consulted gate's outcome (the-loop's words only).
func verdict(rep *graph.StepReport) string {
	switch {
	case rep.Moved:
		return fmt.Sprintf("%s → %s; the gate passed and the work item moved to %s", rep.Outcome, rep.CurrentNode, rep.CurrentNode)
	case rep.Status == graph.StatusWait:
		return "still waiting: no authorized decision in this event"
	default:
		return fmt.Sprintf("%s (%s)", rep.Status, rep.Outcome)
	}
}

// isClose reports a "closed" event of a closing kind (an issue's, a pull
// request's) for the work item itself.
func (in *intake) isClose(ev *ingress.Event, item workitem.Ref) bool {
	if ev.Action != "closed" || !ingress.KindOf(ev.Event).Closes {
		return false
	}
	var p struct {
		Issue *struct {
			Number int `json:"number"`
		} `json:"issue"`
		PullRequest *struct {
			Number int  `json:"number"`
			Merged bool `json:"merged"`
		} `json:"pull_request"`
	}
	if len(ev.Payload) == 0 || json.Unmarshal(ev.Payload, &p) != nil {
		return false
	}
	switch {
	case p.Issue != nil:
		return p.Issue.Number == item.Number
	case p.PullRequest != nil:
		return p.PullRequest.Number == item.Number
	}
	return false
}

func closeReason(ev *ingress.Event) string {
	if ev.Event == ingress.KindIssues {
		return "issue-closed"
	}
	if strings.Contains(string(ev.Payload), `"merged":true`) {
		return "pr-merged"
	}
	return "pr-closed"
}

// closeSession ends the work item's session, marks the graph binding
// dead, clears the control record and removes the worktree (unless kept).
func (in *intake) closeSession(ctx context.Context, item workitem.Ref, rec sessions.Record, ev *ingress.Event, reason string) {
	in.link.onClose(ctx, item, rec.Cwd, rec.SessionID)
	if err := in.mgr.CloseWith(ctx, item, in.conf().Close); err != nil {
		in.emit("session.close_failed", graph.LevelWarning, item, ev, graph.Field{Key: "error", Value: err.Error()})
	}
	_ = in.ctl.Clear(item)
	in.emit("session.autoclosed", graph.LevelInfo, item, ev, graph.Field{Key: "reason", Value: reason})
	in.endPRSessions(ctx, item, rec, ev, false)
	in.removeCheckout(ctx, item, ev)
}

func (in *intake) removeCheckout(ctx context.Context, item workitem.Ref, ev *ingress.Event) {
	if in.ws == nil || in.conf().KeepCheckoutOnClose {
		return
	}
	if err := in.ws.Remove(ctx, item); err != nil {
		in.emit("workspace.remove_failed", graph.LevelWarning, item, ev, graph.Field{Key: "error", Value: err.Error()})
		return
	}
	in.emit("workspace.removed", graph.LevelInfo, item, ev)
}

// applyControl applies a consumed control command (docs/daemon.md §6.3).
// Consumed commands are never forwarded to the agent.
func (in *intake) applyControl(ctx context.Context, item workitem.Ref, ev *ingress.Event, c *ingress.ControlCommand) error {
	rec, live := in.live(item)
	now := in.now()
	source := "comment"
	if ev.Source == ingress.SourceCLI {
		source = "cli" // queued by the operator's verb (operatorverbs.go)
	}
	record := func() error {
		return in.ctl.Record(item, c.Command, source, c.Actor, c.Note, now)
	}
	effect := "noop"
	reject := func(reason string) error {
		in.emit("control.rejected", graph.LevelInfo, item, ev, graph.Field{Key: "command", Value: string(c.Command)}, graph.Field{Key: "reason", Value: reason})
		return nil
	}
	switch c.Command {
	case ingress.CmdStart, ingress.CmdContribute, ingress.CmdDo:
		if !live {
			if reason := in.refusal(item, ev, c.Command); reason != "" {
				return reject(reason)
			}
			if err := record(); err != nil {
				return err
			}
			in.emit("control.command", graph.LevelInfo, item, ev, graph.Field{Key: "command", Value: string(c.Command)}, graph.Field{Key: "actor", Value: c.Actor}, graph.Field{Key: "effect", Value: "spawn"}, graph.Field{Key: "via", Value: source})
			return in.withReactions(ctx, item, ev, func() error { return in.spawn(ctx, item, ev) })
		}
		if err := record(); err != nil {
			return err
		}
		if rec.Status == sessions.StatusPaused {
			if err := in.setStatus(ctx, item, sessions.StatusActive); err != nil {
				return err
			}
			effect = "resumed"
		}
	case ingress.CmdResume:
		if !live || rec.Status != sessions.StatusPaused {
			return reject("nothing-to-resume")
		}
		if err := in.setStatus(ctx, item, sessions.StatusActive); err != nil {
			return err
		}
		if err := record(); err != nil {
			return err
		}
		effect = "resumed"
	case ingress.CmdPause:
		if err := record(); err != nil {
			return err
		}
		if live && rec.Status != sessions.StatusPaused {
			if err := in.setStatus(ctx, item, sessions.StatusPaused); err != nil {
				return err
			}
			effect = "paused"
		}
	case ingress.CmdStop:
		if err := record(); err != nil {
			return err
		}
		if live {
			in.link.onClose(ctx, item, rec.Cwd, rec.SessionID)
			if err := in.mgr.CloseWith(ctx, item, in.conf().Close); err != nil {
				return err
			}
			in.endPRSessions(ctx, item, rec, ev, false)
			effect = "stopped"
		}
	case ingress.CmdCleanup:
		if err := record(); err != nil {
			return err
		}
		effect = "nothing-to-clean"
		if r, err := in.reg.Get(item); err == nil {
			in.endPRSessions(ctx, item, r, ev, true)
			if err := in.mgr.Close(ctx, item, false); err != nil {
				return err
			}
			if err := in.reg.Delete(ctx, item); err != nil {
				return err
			}
			effect = "cleaned"
		}
		if in.ws != nil {
			if err := in.ws.Remove(ctx, item); err == nil {
				effect = "cleaned"
			}
		}
	default:
		return reject("unknown-command")
	}
	in.emit("control.command", graph.LevelInfo, item, ev, graph.Field{Key: "command", Value: string(c.Command)}, graph.Field{Key: "source", Value: source}, graph.Field{Key: "via", Value: source},
		graph.Field{Key: "actor", Value: c.Actor}, graph.Field{Key: "effect", Value: effect})
	return nil
}

func (in *intake) setStatus(ctx context.Context, item workitem.Ref, st sessions.Status) error {
	_, err := in.reg.Update(ctx, item, func(r *sessions.Record, exists bool) error {
		if !exists {
			return errors.New("no session record")
		}
		r.Status = st
		return nil
	})
	if err == nil {
		name := "session.resumed"
		if st == sessions.StatusPaused {
			name = "session.paused"
		}
		in.record(name, graph.LevelInfo, graph.Field{Key: "work_item", Value: item.String()})
	}
	return err
}

// cloneURLs says where to clone a work item's repository from: override
// (Deps.CloneURL) when given, else template (routing.workspace.cloneUrl)
// expanded, else the payload's clone_url when checkedCloneURL accepts it;
// "" lets the workspace clone https://<host>/<owner>/<repo>.git.
func cloneURLs(override func(workitem.Ref) string, template string) func(workitem.Ref, *ingress.Event) string {
	return func(item workitem.Ref, ev *ingress.Event) string {
		switch {
		case override != nil:
			return override(item)
		case template != "":
			return strings.NewReplacer("{host}", item.HostOrDefault(), "{owner}", item.Owner, "{repo}", item.Repo).Replace(template)
		}
		return payloadCloneURL(ev, item)
	}
}

// payloadCloneURL is the payload's repository.clone_url (as the reference
// does, docs/daemon.md §7.5) when the repository it names is the work item's
// and checkedCloneURL accepts it; "" otherwise.
func payloadCloneURL(ev *ingress.Event, item workitem.Ref) string {
	var p struct {
		Repository struct {
			FullName string `json:"full_name"`
			CloneURL string `json:"clone_url"`
		} `json:"repository"`
	}
	if ev == nil || len(ev.Payload) == 0 || json.Unmarshal(ev.Payload, &p) != nil {
		return ""
	}
	if !strings.EqualFold(p.Repository.FullName, item.Owner+"/"+item.Repo) {
		return ""
	}
	return checkedCloneURL(p.Repository.CloneURL, item)
}

// checkedCloneURL returns u when it is an https or ssh URL of item's own
// repository on item's own host, "" otherwise. The payload is outside
// input — signed, but under --insecure-accept-unsigned or with a leaked
// secret anyone's — and git follows a URL wherever it points: file:// would
// clone a directory of this machine into the agent's workspace, another
// host a repository of the sender's choosing.
func checkedCloneURL(u string, item workitem.Ref) string {
	if u == "" || strings.ContainsAny(u, " \t\r\n\x00\\") {
		return ""
	}
	pu, err := url.Parse(u)
	if err != nil || pu.Opaque != "" || pu.RawQuery != "" || pu.Fragment != "" || pu.ForceQuery {
		return ""
	}
	switch pu.Scheme {
	case "https":
		if pu.User != nil { // credentials in a URL end up in .git/config
			return ""
		}
	case "ssh":
		if pu.User != nil {
			if _, hasPass := pu.User.Password(); hasPass {
				return ""
			}
		}
	default:
		return ""
	}
	host := item.HostOrDefault()
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h // a GHE host configured with a port: the clone may use another
	}
	if host == "" || !strings.EqualFold(pu.Hostname(), host) {
		return ""
	}
	want := "/" + item.Owner + "/" + strings.TrimSuffix(item.Repo, ".git")
	if p := strings.TrimSuffix(pu.Path, ".git"); !strings.EqualFold(p, want) {
		return ""
	}
	return u
}
