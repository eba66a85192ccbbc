// Package usage reads what an agent session spent — tokens by kind, per
// model, per turn — from the harness's own record of its conversation
// (Claude Code's transcript, Codex's session log, Gemini CLI's chat
// record), and keeps it per work item, session, node and day with an
// estimated cost from the operator's rate card (docs/usage.md).
//
// The record is the agent's file: it is read with bounds (a line, a read,
// a file that is not a regular file inside the session's home is
// refused), incrementally (each read starts where the last one stopped, so
// a growing transcript is never read twice), and what it says is never a
// fact that moves a gate: it feeds figures and budgets only. An agent can
// understate its own usage by editing its record; it cannot make loopd read
// a file outside its home or spend loopd's memory.
//
// The package does no ticket or session I/O: the daemon polls it
// (loop/daemon/usagewatch.go) and acts on budgets.
package usage
