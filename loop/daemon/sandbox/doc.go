// Package sandbox confines the AI coding agent that loopd hosts, so the
// agent cannot get past the gates it is walked through (docs/decisions.md §18: the
// agent's session is untrusted; it runs as the same OS user as loopd).
//
// Its job, and nothing else:
//   - Env: the allowlisted environment a harness (and the private tmux
//     server its panes are born from) starts with. Nothing loopd or an
//     integration reads as a secret ever reaches it.
//   - Policy + Launcher: a Landlock ruleset (read-write on the session's
//     worktree, the harness's own config/cache directories and the temp
//     dir; read+execute on system and toolchain directories; under loopd's
//     state root only what loop-gate needs), applied by a small launcher
//     process that loopd's own executable becomes when it is started with
//     LauncherArg as its first argument. An outer launcher process stays
//     unconfined, makes itself a child subreaper and waits until every
//     descendant is gone; an inner step applies the ruleset (with signal
//     and abstract-socket scoping, so the agent cannot kill its launcher)
//     and execs the target. So every process the agent starts — however
//     it forks or detaches — stays below a launcher. That is what
//     InSandbox relies on. The tmux server is started through a launcher
//     too (the union of its panes' policies), so `tmux new-window` from a
//     pane gains nothing; each pane's harness gets a narrower layer.
//   - Harden: loopd makes itself non-dumpable and scrubs the environment
//     block /proc/<pid>/environ shows.
//   - InSandbox: whether a process (an operator socket's peer) descends
//     from a launcher, so operator surfaces refuse callers from inside an
//     agent session. Landlock (ABI ≤ 7) does not stop connect(2) on a
//     pathname unix socket, so the socket's peer is checked as well.
//
// It is the one seam every harness goes through: sessions asks it to wrap
// a spawn; no harness adapter builds its own confinement. It imports
// nothing of the daemon.
package sandbox
