// Package sessions hosts agent harness sessions for work items: one tmux
// session per work item that an operator can attach to and take over, one
// git clone of its own per work item, and a registry that remembers both.
//
// The package owns five things:
//
//   - Tmux: the only way theloop touches tmux. It spawns detached sessions
//     named loop-<slug>, pastes text into them (load-buffer + bracketed
//     paste-buffer + a separate submit, then a receipt proving the pane got
//     it), probes liveness (live, dead, absent or unknown) and kills only
//     loop-* sessions.
//   - Harness adapters (ClaudeCode, Cursor): the argv each agent CLI needs,
//     and for Claude Code the trust/plugin settings written before a spawn.
//   - Registry: one JSON record per work item under a directory it is
//     given, written atomically, found by work item or by harness session id
//     (LookupBySessionID is the cheap path loop-gate uses).
//   - Workspaces: one bare mirror per repository, loopd's alone, and one
//     clone of its own per work item on branch issue-<n>, made from the
//     mirror and owned by exactly one work item; loopd never runs git in a
//     clone once the agent has it (CheckedOutBranch and OriginURL read
//     files instead).
//   - Manager: the policy that ties them together — spawn, deliver, and
//     respawn a dead session by resuming its conversation or, failing that,
//     starting fresh seeded with the work item's artifacts.
//
// Boundaries. Every program (tmux, git, the harness) runs through the
// run.Runner passed in; argv is always a list and text that came from
// outside (comments, titles, prompts) never goes on a command line — it is
// pasted from a temporary file. The package reads no global configuration:
// callers pass small config values (TmuxConfig, WorkspaceConfig,
// ClaudeConfig, ManagerConfig). It does not decide *when* to spawn or what to
// say: the dispatcher decides that and renders the prompts.
//
// Safety rules the code keeps, because an operator may be typing in any of
// these sessions: a live session is never killed or spawned over; a session
// whose state cannot be read (unknown) is treated as possibly live, never
// as absent; only sessions named loop-* are ever killed.
package sessions
