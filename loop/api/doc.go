// Package api is the client end of loopd's control plane and its wire
// vocabulary: the request and answer types of every route under Prefix
// (/api/v1), the socket's name under the state root, and Client, which
// loopctl uses to reach a running daemon over its unix socket or, with a
// bearer token, over TCP (docs/decisions.md §11).
//
// The package is what every `loopctl` invocation links, so it imports
// net/http, encoding/json and package graph (whose Report, Claim and
// results the answers carry) and nothing of the daemon: the server that
// answers these routes is package loop/daemon/apiserver, which links the
// runtime, the queue and the session registry. internal/layering holds
// both halves to that line.
//
// Refs travel in the query or the body, never in paths. Errors answer
// {"detail": "..."}; Client turns a non-2xx answer into an *APIError and
// an absent daemon into ErrUnreachable.
package api
