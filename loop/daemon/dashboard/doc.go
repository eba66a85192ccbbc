// Package dashboard is loopd's web dashboard (docs/decisions.md §17):
// where every work item stands, its graph with its position, and its human
// gates decided in one click — through the same authorized-comment path as
// GitHub, never a back door.
//
// Pages are server-rendered with html/template from embedded templates and
// assets (go:embed); one small vanilla script (assets/dash.js) keeps the
// board live over Server-Sent Events. No framework, no bundler, no Node.
//
//   - Board (/): every tracked work item (one with a session record, and
//     one the daemon knows is armed without a live session) — repository, ticket link, title,
//     current node and phase, state (working, waiting on a human, blocked
//     with the finding, parked, done; awaiting start, queued, spawn failed
//     with the reason), time in the node, session live/dead
//     with the `tmux attach` command, last event — filtered by repository
//     and state, sorted by waiting time. A change notification (Notify)
//     makes the update goroutine re-read the Source and send the changed
//     rows as JSON on /events; the script writes them with textContent.
//   - Work item (/item?ref=…): the graph as inline SVG with passed, skipped,
//     current and blocked nodes marked; the current node's messages; the
//     artifacts with their lock status; the recorded decisions (who, when,
//     which comment, and the signature verdict); the timeline from the
//     event log; and at an open human gate, "Approve", "Approve with
//     comments" and "Request changes".
//   - The agent's pane, live, on the work-item page (routing.webTerminal.mode
//     view, the default; off hides it): /item/pane streams the session's
//     screen while the page is open — tmux capture-pane -e polled every
//     100 ms (package internal/panewatch), only the rows that changed,
//     capped at PaneBytesPerSecond per viewer. With mode reply, an operator
//     who is an authorized user gets a reply box (POST /item/reply): loopd
//     pastes the text marked as theirs, refuses control keywords and
//     records who said what in the event log; a reply is never a gate
//     decision. Anyone else gets no box and a 403 from the route.
//     The page reloads itself when its item moves on (node or state),
//     keeping the notice of the operator's last reply; while a reply is
//     being written it does not reload but says it is behind, so no draft
//     is lost.
//     The screen is rendered on the server, not by xterm.js: tmux has
//     already emulated the terminal, so the browser needs coloured text,
//     not a terminal emulator — a small SGR parser (ansi.go) instead of a
//     pinned npm bundle, its licence and a script that interprets the
//     agent's bytes in the operator's browser; rows travel as JSON spans
//     written with textContent, colours as class names (the CSP allows no
//     inline style).
//   - Metrics (/metrics): gate dwell p50/p90 per gate, items stuck past a
//     threshold, throughput per phase per day, blocks by hook — from the
//     event log, drawn as inline SVG on the server.
//   - Events (/log): the event log queried by work item, kind and time,
//     newest first, each row with its raw record (eventlog.go); a full
//     page links the older one with a cursor (until and skip: the events
//     of the boundary's instant already shown), so events logged in one
//     instant are neither lost nor shown twice across pages.
//   - Settings (/settings): the configuration loopd runs with, as
//     `loopctl config show` prints it, read-only and redacted
//     (settings.go); after a reload, the file as that reload read it, and
//     a line naming the keys that wait for a restart.
//
// The graph picture is laid out here, not by Graphviz. A layered layout
// of our own (longest-path layers over the forward edges, back edges found
// by a depth-first walk and drawn dashed on the side, one barycentre pass
// to order each layer) is ~200 lines, deterministic, and has no cgo or
// WebAssembly runtime behind it; github.com/goccy/go-graphviz resolves but
// brings a wasm Graphviz (wazero) into the daemon for graphs of twenty
// nodes. The nodes keep the ids of `graph show --format dot`, so the two
// pictures name the same things.
//
// Security. The server listens on the loopback interface only and answers
// only to loopback Host names (no DNS rebinding). Nothing is readable
// without a session: `loopctl dashboard` reads the login file
// (<state root>/dashboard.json, 0600, written by the running loopd: the
// URL and a random key) and mints a one-time login URL — a nonce and an
// expiry under an HMAC of that key — that /login redeems once for an
// HttpOnly, SameSite=Strict session cookie (the Jupyter pattern; the token
// never reaches the daemon over any other channel). Every form carries the
// session's CSRF token, and an unsafe request must also be one the browser
// marks as same-origin (Sec-Fetch-Site: same-origin, or an Origin equal to
// the dashboard's own): a cookie and a token a program replays without
// either are refused, as are cross-origin requests; a strict
// Content-Security-Policy allows only the page's own script and styles (no
// inline script or style). Work items' text — titles, findings, comments,
// event fields — is untrusted and only ever reaches the page through
// html/template's escaping or textContent.
//
// Gate actions post an ordinary comment on the ticket as the operator
// (Config.Operator, through Deps.Poster — an integrations set with the
// operator's own GitHub identity). The gate moves only when that comment
// returns through the webhook, ingress and the authorization check. An
// operator not in routing.authorizedUsers is offered no actions.
package dashboard
