// Package apiserver is loopd's control plane: HTTP under /api/v1 on a unix
// socket (<state root>/loopd.sock, mode 0600) by default, on TCP only
// behind a bearer token, never with CORS (docs/decisions.md §11).
//
// The verbs are the CLI's: check and graph show/status/complete/advance/
// force/skip open the same graph.Runtime the CLI opens (loop.OpenRepo →
// Repo.Runtime) and answer the same JSON (graph.Report, graph.Claim,
// graph.StepReport, graph.ForceResult, graph.SkipResult, loop.GraphView);
// sessions (list, show, stop, pause, resume, attach command, link-pr), events (query
// and a live SSE stream of event-log lines), "needs you" (attention) and
// queue (depth, oldest age, dead letters and replay) reach the running daemon through the Backend
// interfaces, which package loop/daemon implements. The package imports no
// other daemon part: the daemon mounts it.
//
// Every request has a Caller the transport authenticated (caller.go): on
// the socket, PeerContext reads the peer's credentials (SO_PEERCRED) at
// accept time and the daemon's PeerPolicy names the peer or refuses it
// (inside an agent session, another OS user); on TCP, RequireToken.
// Authenticated answers 403 to a refused or unidentified caller on every
// route. The verbs that act for an operator (graph force and skip, session
// stop/pause/resume) record the caller's identity as the actor; a body
// actor naming anyone else is refused with 403, never recorded.
//
// The per-session verbs (sessionverbs.go: start, stop, pause, resume,
// cleanup and reply as POST, transcript and the pane's live screen as GET)
// name the work item in the path, /sessions/{ref}/{verb}, the ref escaped
// as one segment (api.SessionPath); start and cleanup act as the ticket's
// keywords do, reply pastes the operator's words into the session, and
// none of them can decide a gate. Every other verb takes its ref in the
// query or the body. Errors answer
// {"detail": "..."} with 400 for bad input, 403 for a caller refused or an
// actor not its own, 404 for an unknown session or dead letter, 503 when
// a part is not running, 500 otherwise.
//
// The wire types (requests and answers) and the client loopctl uses are
// package loop/api, which links nothing of the daemon.
package apiserver
