// Package layering holds no code: its tests check that the module's
// packages import one another only in the direction README's "How it is
// built" describes (graph at the bottom, binaries at the top), and that the
// binaries run on every claim and check (loopctl, loop-gate) link no
// daemon part — no NATS, no html/template, no MCP SDK, no chromedp — by
// asking `go list -deps` (skipped when the go tool is not on PATH).
package layering
