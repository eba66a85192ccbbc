package sessions

import "errors"

// Sentinel errors. Callers branch on them with errors.Is; the errors the
// package returns wrap them with the work item, session or path involved and
// what to do about it. A work-item ref that does not parse wraps
// workitem.ErrInvalid.
var (
	// ErrInvalidName: a session name, branch, path component or session id
	// failed validation before it could reach argv or the filesystem.
	ErrInvalidName = errors.New("invalid name")
	// ErrUnsafeArgument: an argument would be reinterpreted by tmux (one
	// ending in ";" starts a new tmux command) or contains a NUL or newline.
	ErrUnsafeArgument = errors.New("unsafe argument")
	// ErrNotLoopSession: the session is not named loop-*, so theloop will not
	// signal, kill or paste into it.
	ErrNotLoopSession = errors.New("not a loop-* session")
	// ErrSessionLive: a live session holds the name; it is never replaced.
	ErrSessionLive = errors.New("session is live")
	// ErrSessionUnknown: tmux did not say whether the session exists; it is
	// treated as possibly live, so nothing is spawned over it.
	ErrSessionUnknown = errors.New("session state unknown")
	// ErrSessionMissing: there is no live session to deliver into (absent, or
	// its harness exited).
	ErrSessionMissing = errors.New("session missing")
	// ErrSessionOccupied: a dead session holds the name and could not be
	// cleared.
	ErrSessionOccupied = errors.New("session name occupied")
	// ErrNotReady: the harness never drew a steady screen to paste into.
	ErrNotReady = errors.New("session not ready")
	// ErrNotReceived: pasted text never showed up in the pane.
	ErrNotReceived = errors.New("delivery not received")
	// ErrEmptyDelivery: nothing left to paste after removing control
	// characters.
	ErrEmptyDelivery = errors.New("empty delivery")
	// ErrUnknownHarness: no adapter is registered under that name.
	ErrUnknownHarness = errors.New("unknown harness")
	// ErrHarnessNotFound: the harness binary is not on PATH.
	ErrHarnessNotFound = errors.New("harness binary not found")
	// ErrInteractiveUnsupported: the harness cannot host an interactive
	// session.
	ErrInteractiveUnsupported = errors.New("harness cannot host an interactive session")
	// ErrResumeUnsupported: the harness cannot reopen a conversation by id
	// (Cursor); a respawn starts a fresh one pointed at the artifacts.
	ErrResumeUnsupported = errors.New("harness cannot resume a conversation")
	// ErrNoRecord: the registry has no record for the work item or session id.
	ErrNoRecord = errors.New("no session record")
	// ErrCorruptRecord: a registry file exists but does not parse.
	ErrCorruptRecord = errors.New("corrupt session record")
	// ErrSlugCollision: two different work items map to the same slug (file
	// name, tmux name); the second is refused rather than overwrite the first.
	ErrSlugCollision = errors.New("work items share a slug")
	// ErrSessionClosed: the work item's session record is closed.
	ErrSessionClosed = errors.New("session closed")
	// ErrSessionPaused: the work item's session is paused by an operator.
	ErrSessionPaused = errors.New("session paused")
	// ErrSessionOwned: the conversation is another work item's session.
	ErrSessionOwned = errors.New("conversation owned by another work item")
	// ErrWorktreeOwned: the worktree belongs to another work item.
	ErrWorktreeOwned = errors.New("worktree owned by another work item")
	// ErrWorkspaceConflict: a directory is in the way of a clone or worktree
	// and is not one theloop made.
	ErrWorkspaceConflict = errors.New("workspace path in the way")
	// ErrBranchMissing: a checkout was asked for a branch that neither the
	// clone nor origin has (PrepareOptions.RequireBranch).
	ErrBranchMissing = errors.New("branch missing")
	// ErrCwdMissing: the session's recorded working directory is gone.
	ErrCwdMissing = errors.New("session working directory missing")
	// ErrNotConfined: the tmux server hosting a session does not run in the
	// sandbox (someone else started it on loopd's socket); the session is
	// not left running.
	ErrNotConfined = errors.New("tmux server is not confined: stop it (`tmux -L <socket> kill-server`) so loopd starts its own")
)
