// Package daemon assembles loopd: the webhook receiver (package ingress), the
// durable queue (loop/daemon/queue, NATS JetStream), the dispatcher
// (loop/daemon/dispatch) and the intake that turns each event into effects —
// control commands, spawning an agent session per work item in tmux (package
// sessions), pasting event prompts and graph assignments into it, and walking
// the work item's process graph (the graph link, docs/daemon.md §6
// and §8, docs/daemon.md §8). The intake and the graph link hold their collaborators
// (newIntake, newGraphLink), not the daemon; Daemon.wire in daemon.go is the
// one place the parts meet: receiver → queue → dispatcher → intake → sessions.
//
// The assembly API, for cmd/loopd and for embedders such as `loopd demo`:
//
//	cfg := daemon.DefaultConfig()
//	cfg.StateRoot = "/abs/state"                  // required, absolute
//	cfg.Webhook.Port = 0                          // default 127.0.0.1:8787; 0 picks one
//	cfg.Secret = []byte(secret)                   // or InsecureAcceptUnsigned
//	cfg.Routing.AuthorizedUsers = []string{"dana"} // the settings' keys, as loop.Settings holds them
//	cfg.Routing.SpawnOnUnmatched = daemon.SpawnLabeled
//	d, err := daemon.New(cfg, daemon.Deps{
//		Clock:        graph.SystemClock{}, // the one clock every part reads
//		Integrations: set,          // graph.Integrations reaching (a stand-in for) GitHub
//		Path:         os.Getenv("PATH"), // where the harness binary (claude) is found
//		CloneURL:     func(item workitem.Ref) string { return "/tmp/remote.git" },
//		Observer:     daemon.ObserverFunc(func(o daemon.Observation) { fmt.Println(o) }),
//	})
//	go d.Run(ctx)                                 // returns after ctx ends and work drained
//	<-d.Ready(); addr := d.Addr()                 // the bound webhook address
//
// ConfigFromCLI holds the operator's cli-config.yaml (docs/daemon.md §12),
// read once into loop.Settings, in a Config. Run takes the one-instance lock on the state root (flock on
// <state root>/loopd.lock), opens the queue (embedded NATS with its file
// store under <state root>/queue unless queue.url names a server),
// serves POST <webhooks.ghWebhook.path> and GET /healthz, dispatches, reconciles, and on
// cancellation stops accepting webhooks, lets running dispatches finish
// (nothing is acknowledged that did not finish) and shuts everything down.
//
// Every webhook kept, every paste into a session, every comment posted and
// every graph transition is reported to Deps.Observer (the demo prints them)
// as well as to the event log.
//
// Guarantees. The receiver answers 202 only after the event is on the
// stream. The dispatcher handles one work item's events in order, at most
// Parallelism work items at once, and acknowledges an event only after its
// effects are done and recorded (package dispatch). Handling is idempotent:
// a redelivered spawn finds the session it started and finishes what a
// crash interrupted (graph start, announcement); a redelivered comment is
// not pasted twice; a gate verdict is recorded once by the runtime. A
// failure that a retry can fix (tmux, git, a GitHub outage during the
// announcement) fails the dispatch and is retried with backoff, then
// dead-lettered for the operator (DeadLetters, Replay). Gate decisions the
// daemon records are signed with its key under the state root.
//
// Several machines (docs/decisions.md §15, cluster.go, examples/cluster): with
// service.node set, loopd is one node of several sharing queue.url's NATS
// cluster — each work item owned by one node at a time through a lease
// (dispatch.Shared), at most service.maxSessions per node, a dead node's
// items taken over by the others (session.takeover). Without it, one
// instance dispatches the whole queue and others wait as standbys.
//
// Pull requests (docs/daemon.md §6.7, prsessions.go). A PR's event is
// served by the work item it is linked to: its closing references,
// keywords and issue-<n> branch name it, and once delivered or spawned the
// link is recorded on the work item's record (pullRequests[],
// session.pr_linked), so later events on the PR find the work item without
// them (the agent or an operator links one by hand with `loopctl sessions
// link-pr`). When the work item's sessionPerPr (the value its phase selection
// froze, else routing.tmux.sessionPerPr) splits the PR off — always, or
// cross-repository for a PR in another repository — and the PR can have a
// checkout of its own (a workspace is configured, its head branch is known
// and exists, and it is not the branch the work item's session is on), the
// PR gets its own session: its own worktree on the head branch (for a PR
// from a fork, refs/pull/<n>/head checked out as pr-<n>), its own
// tmux session loop-<pr slug>, a record whose parent is the work item,
// THE_LOOP_WORK_ITEM naming the work item and THE_LOOP_PR the PR, its
// inner loop (pdlc-pr-loop) started beside the work item's state, and an
// announcement on the PR (session.pr_spawned). Otherwise the event goes
// into the work item's session (session.pr_session_declined {reason:
// no-separate-checkout | shared-worktree | workspace-failed}); a failed
// PR spawn does the same. A linked PR closing ends only its own session
// (session.pr_closed, session.kept_open; merged ⇒ its inner loop is forced
// to complete); the work item's close, stop or cleanup ends them all.
//
// Branch-linkage verification (docs/daemon.md §6.2, linkage.go). A ref found
// only through the issue-<n> branch convention, on an event none of whose
// refs has a live session, is checked with GitHub through the configured
// integrations client (api or cli transport): a 404 drops it
// (routing.linkage_dropped; nothing left ⇒ dispatch.dropped
// work-item-not-found), any other answer keeps it. Definite answers are
// cached (LRU, 256). A 404 on a spawn's announcement marks the work item
// missing (session.work_item_missing); the session is kept.
//
// Closing (docs/daemon.md §6.6). By default (routing.tmux.keepSessionOnClose,
// killHarnessOnClose) a closed work item's tmux session is kept for a
// post-mortem and the harness inside it terminated — SIGTERM to each pane's
// process group, SIGKILL after harnessKillGraceSeconds (session.retained,
// session.harness_terminated); keepSessionOnClose false kills the session,
// killHarnessOnClose false leaves the harness running.
//
// The agent's ticket effects (docs/decisions.md §18, outbox.go). A session holds no
// credential: what its claims and `loopctl ask` do on the ticket — the
// loop: phase label, review requests, marked comments — is recorded as
// intents in <state root>/outbox/<session id>/intents.jsonl (package loop;
// the one directory under the state root a session may write), and Run
// performs them (package loop/daemon/outbox): allowlisted operations only,
// on the session's own work item, parent or linked PRs (refused otherwise:
// outbox.refused), in order per session, once each across restarts
// (<state root>/outbox-done/), retried with back-off (outbox.failed), and
// reported (outbox.performed, the dashboard's pending ticket effects).
package daemon
