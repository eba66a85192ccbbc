package daemon

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/hooks"
	"github.com/theloop-dev/theloop/loop/api"
	"github.com/theloop-dev/theloop/loop/daemon/apiserver"
	"github.com/theloop-dev/theloop/ops"
	"github.com/theloop-dev/theloop/sessions"
	"github.com/theloop-dev/theloop/workitem"
)

// The operator's registry verbs (docs/daemon.md §5.5): reset, register and
// close. The control plane reaches them through apiserver.SessionKeeper.
//
// Authorization follows what the verb does, as the other operator verbs
// do: reset and register set an agent working on the item, as the start
// keyword does, so they need an authorized GitHub user (authorizedOperator);
// close ends a session, as stop does, so the transport's identity suffices.
// Every verb is recorded in the event log (and so the audit log: session.*)
// under the caller's identity before its effect.

// badRequestIfRefused marks the sessions package's refusals as the caller's to fix (400).
func badRequestIfRefused(err error) error {
	for _, e := range []error{sessions.ErrSessionLive, sessions.ErrSessionOwned, sessions.ErrWorktreeOwned, sessions.ErrInvalidName,
		sessions.ErrCwdMissing, sessions.ErrSessionClosed, sessions.ErrSessionPaused, sessions.ErrUnknownHarness, sessions.ErrHarnessNotFound,
		sessions.ErrSessionUnknown, sessions.ErrNotLoopSession} {
		if errors.Is(err, e) {
			return fmt.Errorf("%w: %w", apiserver.ErrBadRequest, err)
		}
	}
	return err
}

// ownedHere refuses an item another loopd node of the cluster holds: its
// session lives there.
func (o *operatorDesk) ownedHere(ctx context.Context, item workitem.Ref, verb string) error {
	if o.cluster.ownsItem(ctx, item) {
		return nil
	}
	return fmt.Errorf("%w: another loopd node of the cluster holds %s; run `loopctl sessions %s` against that node's socket", apiserver.ErrBadRequest, item, verb)
}

// resetPrompt opens the fresh conversation of a reset: the node's
// assignment, as at a spawn (the seed prompt before it names the
// artifacts).
func (o *operatorDesk) resetPrompt(ctx context.Context, item workitem.Ref, cwd, login string) string {
	p := "The operator @" + login + " reset this session: carry on with the work item from its artifacts and its graph state (`loopctl check`)."
	if gc := o.link.spawnContext(ctx, item, cwd); gc != nil && gc.Assignment != "" {
		p += "\n\nThe node you are at and its assignment:\n\n" + gc.Assignment
	}
	return p
}

// ResetSession ends the item's harness and starts a fresh conversation in
// its checkout, at the node the graph state says, seeded with the item's
// artifacts. The graph state, the checkout and the control record are not
// touched; the new conversation is bound in graph-state.json.
func (o *operatorDesk) ResetSession(ctx context.Context, ref, actor string, req api.ResetRequest) (api.SessionResult, error) {
	item, err := parseRef(ref)
	if err != nil {
		return api.SessionResult{}, err
	}
	res := api.SessionResult{Ref: item.String(), Verb: "reset", Effect: "refused", Actor: actor}
	login, err := o.authorizedOperator(ctx, actor, "reset", item)
	if err != nil {
		return res, err
	}
	if err := o.ownedHere(ctx, item, "reset"); err != nil {
		return res, err
	}
	o.policy.RLock()
	defer o.policy.RUnlock()
	rec, err := o.reg.Get(item)
	if err != nil {
		return res, err
	}
	o.emit("session.reset_requested", graph.LevelInfo, graph.Field{Key: "work_item", Value: item.String()}, graph.Field{Key: "actor", Value: actor},
		graph.Field{Key: "via", Value: "cli"}, graph.Field{Key: "session_id", Value: rec.SessionID})
	rr, err := o.mgr.Reset(ctx, item, "the operator @"+login+" reset the session", o.resetPrompt(ctx, item, rec.Cwd, login))
	if rr.Record.SessionID != "" && rr.Record.SessionID != rec.SessionID {
		// The new conversation is the item's now, delivered or not.
		o.link.rebind(ctx, item, rr.Record.Cwd, rr.Record.SessionID)
		res.Effect = "reset"
	}
	res.Session, res.HarnessSessionID, res.PreviousSessionID, res.Artifacts = rr.Record.TmuxName, rr.Record.SessionID, rr.Fallback.PreviousSessionID, rr.Fallback.Artifacts
	if err != nil {
		o.emit("session.reset_failed", graph.LevelWarning, graph.Field{Key: "work_item", Value: item.String()}, graph.Field{Key: "actor", Value: actor}, graph.Field{Key: "error", Value: err.Error()})
		return res, badRequestIfRefused(err)
	}
	res.Tmux = o.tmuxState(ctx, rr.Record.TmuxName)
	if !req.NoComment {
		o.announceSessionVerb(ctx, item, "reset", fmt.Sprintf("Session reset from the CLI by %s: a fresh conversation carries on at the same node from the work item's artifacts.", actor), &res)
	}
	return res, nil
}

// RegisterSession attaches a conversation started outside loopd to the
// item. Beyond the sessions package's own checks (the item's own tmux
// name, a conversation and a checkout no other live item holds), the
// checkout must be a clone of the item's repository.
func (o *operatorDesk) RegisterSession(ctx context.Context, ref, actor string, req api.RegisterRequest) (api.SessionResult, error) {
	item, err := parseRef(ref)
	if err != nil {
		return api.SessionResult{}, err
	}
	res := api.SessionResult{Ref: item.String(), Verb: "register", Effect: "refused", Actor: actor}
	if _, err := o.authorizedOperator(ctx, actor, "register", item); err != nil {
		return res, err
	}
	if err := o.ownedHere(ctx, item, "register"); err != nil {
		return res, err
	}
	// The path is checked before git reads it: a relative one would be read
	// against loopd's own working directory.
	if !filepath.IsAbs(req.Cwd) || filepath.Clean(req.Cwd) != req.Cwd {
		return res, fmt.Errorf("%w: cwd %q must be an absolute, clean path (the checkout the conversation works in)", apiserver.ErrBadRequest, req.Cwd)
	}
	if err := o.link.checkIdentity(ctx, item, req.Cwd); err != nil {
		return res, fmt.Errorf("%w: %s is not a checkout of %s/%s (%v); register the conversation with the checkout it works in", apiserver.ErrBadRequest, req.Cwd, item.Owner, item.Repo, err)
	}
	o.policy.RLock()
	defer o.policy.RUnlock()
	prev, _ := o.reg.Get(item)
	o.emit("session.register_requested", graph.LevelInfo, graph.Field{Key: "work_item", Value: item.String()}, graph.Field{Key: "actor", Value: actor},
		graph.Field{Key: "via", Value: "cli"}, graph.Field{Key: "session_id", Value: req.HarnessSessionID}, graph.Field{Key: "cwd", Value: req.Cwd},
		graph.Field{Key: "force", Value: req.Force})
	rec, err := o.mgr.Register(ctx, sessions.RegisterRequest{Item: item, Harness: req.Harness, SessionID: req.HarnessSessionID, Cwd: req.Cwd, Force: req.Force})
	if err != nil {
		return res, badRequestIfRefused(err)
	}
	o.link.rebind(ctx, item, rec.Cwd, rec.SessionID)
	res.Effect = "registered"
	if prev.Status.Live() && prev.SessionID != rec.SessionID {
		res.Effect, res.PreviousSessionID = "replaced", prev.SessionID
	}
	res.Session, res.HarnessSessionID = rec.TmuxName, rec.SessionID
	res.Tmux = o.tmuxState(ctx, rec.TmuxName)
	if !req.NoComment {
		o.announceSessionVerb(ctx, item, "register", fmt.Sprintf("A %s conversation started outside loopd was registered as this work item's session by %s.", rec.Harness, actor), &res)
	}
	return res, nil
}

// CloseSession ends the item's session and keeps its checkout, its graph
// state and its control record: a later event or `loopctl sessions start`
// brings a new session to the same node. Unlike stop, it records no
// control command, so it does not keep the item from being worked.
func (o *operatorDesk) CloseSession(ctx context.Context, ref, actor string, req api.CloseRequest) (api.SessionResult, error) {
	item, err := parseRef(ref)
	if err != nil {
		return api.SessionResult{}, err
	}
	res := api.SessionResult{Ref: item.String(), Verb: "close", Effect: "already-closed", Actor: actor}
	if err := o.ownedHere(ctx, item, "close"); err != nil {
		return res, err
	}
	o.policy.RLock()
	defer o.policy.RUnlock()
	rec, err := o.reg.Get(item)
	if err != nil {
		return res, err
	}
	res.Session, res.HarnessSessionID = rec.TmuxName, rec.SessionID
	if !rec.Status.Live() {
		return res, nil
	}
	opts := closeOptionsOf(o.cfg)
	if req.KeepTmux != nil {
		opts.KeepTmux = *req.KeepTmux
		opts.KillHarness = *req.KeepTmux
	}
	o.emit("session.close_requested", graph.LevelInfo, graph.Field{Key: "work_item", Value: item.String()}, graph.Field{Key: "actor", Value: actor},
		graph.Field{Key: "via", Value: "cli"}, graph.Field{Key: "session_id", Value: rec.SessionID}, graph.Field{Key: "keep_tmux", Value: opts.KeepTmux})
	o.link.onClose(ctx, item, rec.Cwd, rec.SessionID)
	if err := o.mgr.CloseWith(ctx, item, opts); err != nil {
		return res, badRequestIfRefused(err)
	}
	res.Effect = "closed"
	res.Tmux = o.tmuxState(ctx, rec.TmuxName)
	if !req.NoComment {
		o.announceSessionVerb(ctx, item, "close", fmt.Sprintf("Session closed from the CLI by %s; the checkout and the graph state are kept, and the next event or `loopctl sessions start` brings a new session.", actor), &res)
	}
	return res, nil
}

// announceSessionVerb posts a marked comment saying what the operator did
// to the item's session. Unlike a control command's announcement its first
// line is no keyword: these verbs have none on the ticket.
func (o *operatorDesk) announceSessionVerb(ctx context.Context, item workitem.Ref, verb, text string, res *api.SessionResult) {
	out, err := o.integ.Call(ctx, ops.GitHubAddComment, map[string]any{"ref": item.String(), "body": hooks.Mark("_" + text + "_")})
	if err != nil {
		res.AnnounceError = err.Error()
		o.emit("session.announce_failed", graph.LevelWarning, graph.Field{Key: "work_item", Value: item.String()}, graph.Field{Key: "verb", Value: verb}, graph.Field{Key: "error", Value: err.Error()})
		return
	}
	res.Announced, _ = out["url"].(string)
	if res.Announced == "" {
		res.Announced = item.URL()
	}
}

// tmuxState is the tmux session's liveness as a word (live, dead,
// absent, unknown).
func (o *operatorDesk) tmuxState(ctx context.Context, name string) string {
	l, _ := o.tmux.Probe(ctx, name)
	return l.String()
}

var _ apiserver.SessionKeeper = (*operatorDesk)(nil)
