// Package daemon assembles loopd: the webhook receiver (package ingress), the
// durable queue (loop/queue, NATS JetStream), the dispatcher (loop/dispatch)
// and the intake that turns each event into effects — control commands,
// spawning an agent session per work item in tmux (package sessions), pasting
// event prompts and graph assignments into it, and walking the work item's
// process graph (GraphLink, reference daemon-spec §6 and §8, seed 003).
//
// The assembly API, for cmd/loopd and for embedders such as `loopd demo`:
//
//	cfg := daemon.DefaultConfig()
//	cfg.StateRoot = "/abs/state"                  // required, absolute
//	cfg.Listen = "127.0.0.1:0"                    // default 127.0.0.1:8787
//	cfg.Secret = []byte(secret)                   // or InsecureAcceptUnsigned
//	cfg.AuthorizedUsers = []string{"dana"}
//	cfg.SpawnOnUnmatched = daemon.SpawnLabeled
//	d, err := daemon.New(cfg, daemon.Deps{
//		Integrations: set,          // graph.Integrations reaching (a stand-in for) GitHub
//		Path:         os.Getenv("PATH"), // where the harness binary (claude) is found
//		CloneURL:     func(item workitem.Ref) string { return "/tmp/remote.git" },
//		Observer:     daemon.ObserverFunc(func(o daemon.Observation) { fmt.Println(o) }),
//	})
//	go d.Run(ctx)                                 // returns after ctx ends and work drained
//	<-d.Ready(); addr := d.Addr()                 // the bound webhook address
//
// ConfigFromCLI maps the operator's cli-config.yaml (daemon-spec §12) onto a
// Config. Run takes the one-instance lock on the state root (flock on
// <state root>/loopd.lock), opens the queue (embedded NATS with its file
// store under <state root>/queue unless Config.QueueURL names a server),
// serves POST <WebhookPath> and GET /healthz, dispatches, reconciles, and on
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
// Several machines (decision 15, cluster.go, examples/cluster): with
// service.node set, loopd is one node of several sharing queue.url's NATS
// cluster — each work item owned by one node at a time through a lease
// (dispatch.Shared), at most service.maxSessions per node, a dead node's
// items taken over by the others (session.takeover). Without it, one
// instance dispatches the whole queue and others wait as standbys.
//
// Not built yet (reference behaviour this package does not have):
// pull-request
// endpoints with their own sessions (daemon-spec §6.7) — PR events go to the
// work item's session; terminating only the harness on close while keeping
// the tmux pane (killHarnessOnClose); branch-linkage verification (§6.2);
// the control socket (/api/v1, /metrics, /mcp) and CLI-issued control
// commands (§5.4); hot reload of the configuration.
package daemon
