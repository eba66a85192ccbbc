// Package ingress turns GitHub activity into one stream of routed events.
//
// Two ingresses feed it — the webhook receiver (push) and the poller (pull,
// for hosts GitHub cannot reach) — and both produce the same Event, handed to
// a Sink that the daemon implements with a durable queue. The package owns
// everything between the wire and that hand-off: signature verification
// (fail-closed), the event filter, delivery dedup, the repository bound,
// work-item extraction, the self-authored drop, authorization and control
// keywords. It starts no tmux session, calls no graph runtime and posts
// nothing to GitHub on the request path: the receiver answers 202 only after
// the Sink has kept the event, and before any other work.
//
// # Assembly (what the daemon does)
//
//	cfg := ingress.DefaultConfig()           // loopd builds it from its typed settings
//	router, _ := ingress.NewRouter(cfg, ingress.RouterDeps{Log: eventLog})
//	recv, _ := ingress.NewReceiver(cfg, ingress.ReceiverDeps{Sink: queue, Router: router, Log: eventLog,
//		SinkCopiesPayload: true}) // the queue publishes ev.AppendJSON(buf): a copy, no re-validation
//	srv := ingress.NewServer("127.0.0.1:8787", recv)   // or mount recv on the daemon's own mux
//	_ = srv.Start(); defer srv.Shutdown(ctx)
//	store := ingress.NewPortableStore(stateRoot, nil)
//	poller, _ := ingress.NewPoller(pollCfg, ingress.PollerDeps{GitHub: integrationsSet, Sink: queue, Router: router, Store: store})
//	_, _ = poller.Reconcile(ctx)              // at start-up: catch what was missed while down
//	go poller.Run(ctx)                        // or call Reconcile on the daemon's own ticker
//
// Nothing here starts a goroutine except Server.Start (ended by Shutdown or
// Close); Poller.Run blocks until its context ends.
//
// # Routing order (docs/daemon.md §4)
//
// event filter → delivery dedup → repository bound → work-item extraction →
// self-authored drop → authorization, then the control keyword and the
// content-key dedup. Closes (issues/pull_request "closed") bypass
// authorization: a close can only tear down. An event whose actor comes from
// a comment, review or sender but has no login is unauthorized (the
// reference let an empty actor through everywhere; only CI events, which
// have no human actor, pass without one). A comment or review event is
// routed only when its sender is the comment's author (drop reason
// sender-not-author): GitHub lets a collaborator edit another's comment,
// and the edit arrives under the author's login (docs/decisions.md §19).
// The poller has no sender; it offers edits as "edited", which never
// execute a command, and the daemon lets no edit decide a gate. Each
// routed comment names the issue or pull request it was made on
// (Comment.Item), where the daemon re-reads it before it decides a gate.
// Dropped deliveries are still
// answered 202 (GitHub must not retry them) and counted per reason.
//
// # Event kinds
//
// Each event kind is one entry of the table in kinds.go (KindOf, Kinds):
// its extraction, actor and words, closing, whether and under which action
// it may answer a gate, the daemon's prompt excerpt, its PR/CI meaning and
// what the poller covers. Everything else reads the entry or names the kind
// by its constant; RegisterKind adds a kind at init.
//
// # Control keywords
//
// The vocabulary is closed: start, stop, pause, resume, execute, contribute,
// cleanup, do (docs/daemon.md §5.1), each "the-loop <command>" by default and
// configurable under routing.control.keywords ("" disables one). Force is
// never a keyword; configuring one is refused.
//
// review vs cleanup: the seed's component table lists a "review" keyword,
// the reference code has "cleanup". theloop keeps cleanup (the teardown of
// local resources; it has a defined effect) and has no review keyword: a
// review is a gate answer — a pull_request_review event, or a comment that
// classify-feedback reads — and a keyword that asked for one would either do
// nothing or duplicate what the request-review hook already does on entry to
// a human gate.
//
// Parsing is deliberately narrower than the reference's substring search,
// and follows Prow (kubernetes-sigs/prow), whose plugins match a command
// only at the start of a line and act only on freshly created comments:
//
//	LGTMRe       = regexp.MustCompile(`(?mi)^/lgtm(?: no-issue)?\s*$`)  // pkg/plugins/lgtm
//	LGTMCancelRe = regexp.MustCompile(`(?mi)^/lgtm cancel\s*$`)
//	labelRe      = regexp.MustCompile(`(?mi)^/hold(\s.*)?$`)           // pkg/plugins/hold
//	// Only consider open PRs and new comments.
//	if !e.IsPR || e.IssueState != "open" || e.Action != github.GenericCommentActionCreated {
//		return nil
//	}
//
// So a line counts only when, after at most three spaces of indentation and
// an optional "/", it begins with a keyword (case-insensitive) that is followed by the end of the line,
// whitespace, ".", "!", ";", "," or ": ". Not a command: a keyword inside a
// sentence ("please the-loop start"), a negated one ("the-loop start not
// yet", "... no", "never", "cancel", "later"), a question ("the-loop stop?",
// "the-loop stop, or wait?"), a quoted reply ("> the-loop start"), inline
// code, fenced (``` or ~~~) and indented code blocks, glued suffixes
// ("the-loop startlater", "the-loop start-up"). contribute and do may carry
// their goal on the same line. Two distinct commands in one body are
// ambiguous: nothing runs and the event says so. Only "created" comments and
// "submitted" reviews carry a command: an edited comment is forwarded as
// content but never executes (the edit is not a new instruction, and the
// sender of an edit is not the comment's author). The result is always one
// of the Command constants, never text from the body.
//
// A command needs a named, authorized actor — guaranteed by routing, which
// drops everything else — and the daemon records what it applies in the
// durable control record (PortableStore.RecordControl), the control section
// of <state root>/portable/<slug>.json.
//
// # The poller
//
// The poller (docs/daemon.md §3) reads GitHub through the integrations set the
// operator configured (api or cli transport; no second client): items
// carrying the auto-execute label, their comments (and a PR's reviews and
// inline comments) since the ledger, and, for tracked items no longer
// listed, whether they closed. With a durable queue the reference's
// dispatcher handshake (done/settled/inflight) becomes the Sink's answer: a
// comment is resolved once the Sink keeps it, and a comment the Sink refuses
// stays unseen and is offered again next cycle, in thread order — never
// given up. Rate limits stop the cycle and double the wait (up to
// MaxPollBackoff); a clean cycle resets it. Reconcile itself refuses to
// run during a back-off (ErrBackingOff), so a caller's own ticker cannot
// hammer GitHub either. A comment the webhook already delivered (same
// ContentKey, seen by the shared Router's Deduper) is not sent again.
// Edits are seen too: the ledger keeps each comment's updated_at
// (commentVersions), and a comment or inline review comment listed with
// another updated_at is one new change, offered as "edited" with the
// webhook's content identity (id and updated_at, Event.ContentKey), so the
// same edit by webhook and by poll has one effect; like the webhook's, a
// polled edit never carries a control command. Reviews are listed without
// updated_at, so review edits are seen by webhook only.
//
// Known gaps: <state root>/portable/index.json is not maintained; portable writes are serialised within one process only (the
// daemon owns the state root).
package ingress
