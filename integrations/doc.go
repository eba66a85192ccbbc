// Package integrations performs theloop's own outbound calls — GitHub, Slack
// and Jira — on behalf of graph hooks.
//
// A *Set implements graph.Integrations: a hook calls
//
//	set.Call(ctx, "github.set-labels", map[string]any{"ref": "github:o/r#7", "labels": []string{"loop:design"}, "replacePrefix": "loop:"})
//
// and receives a JSON-shaped result map. Every transport of a provider
// answers an operation with the same map, so swapping a transport changes how
// a side effect is performed, never what a hook concludes (R6.10).
//
// What the package does:
//
//   - Resolves, once at construction, how each configured provider is
//     reached: GitHub through its REST API with a token (transport api) or
//     through the operator's own `gh` login (transport cli, GitHub Enterprise
//     and SSO included); auto takes a configured token first, then `gh` on
//     PATH, and otherwise fails closed naming both remedies. An explicit
//     transport is honoured verbatim, never swapped. Slack is reached through
//     chat.postMessage (api) or an incoming webhook (webhook); Jira through
//     its REST API.
//   - Verifies at load that every operation a graph's hooks declare
//     (graph.HookSpec.Needs) is implemented by a configured, available
//     provider, naming the operation, hook, provider and fix (Set.Verify).
//   - Bounds every call by a timeout; retries 5xx answers of idempotent
//     requests with backoff, waits out rate limits (X-RateLimit-Reset,
//     Retry-After) when the wait fits the call's deadline, and otherwise
//     fails promptly. A failed call returns an *Error and emits one
//     integration.call_failed event to the injected graph.Sink.
//
// What it does not do: decide verdicts (hooks do), compose or stamp comment
// text (hooks add the self-authored marker), resolve notification recipients
// (the notify hook does), or read credentials from anything but the
// environment or an operator-configured secret command. Credentials live only
// in memory; every error string, event field and result is scrubbed of them.
//
// The outside world is injected through Deps: environment lookup, HTTP
// client, command runner (package run — `gh` is never started any other way),
// clock, sleeper and event sink. Untrusted text (comment bodies) never reaches
// a command line: the cli transport hands request bodies to `gh api --input -`
// on stdin.
package integrations
