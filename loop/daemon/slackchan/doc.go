// Package slackchan is loopd's Slack channel: one Slack thread per work
// item, opened when its session is spawned, through which authorized people
// talk to the session, and a /the-loop slash command for the operator's
// session controls (docs/daemon.md §11.5).
//
// Slack reaches loopd in one of two ways, chosen by channels.slack.mode:
// the Events API (Slack POSTs signed requests to a path on loopd's webhook
// listener; every request's v0 signature and timestamp are checked against
// the signing secret, and without a secret the endpoint is not served) or
// Socket Mode (loopd dials Slack over a websocket with an app-level token;
// nothing listens).
//
// The package decides nothing about a work item. It maps a Slack user to a
// GitHub login (channels.slack.users), asks its Backend whether that login
// is authorized (the same allowlist the ticket's keywords are held to), and
// hands the text to the Backend: mirrored on the ticket as a marked comment
// (which no ingress acts on) and pasted into the live session as the
// operator's reply is. A decision word in Slack passes no gate: gates read
// only comments whose sender and author are the authorized person on the
// ticket, and loopd holds no token of that person; the channel answers in
// the thread with the ticket's link instead.
//
// Boundaries: no tmux, no graph runtime, no GitHub client — the daemon
// implements Backend. Thread bindings and the ids of events already handled
// are kept in <state dir>/slack.json, so a restart reuses every thread and
// does not act twice on a retried event.
package slackchan
