// Package layering holds no code: its tests check that the module's
// packages import one another only in the direction README's "How it is
// built" describes (graph at the bottom, binaries at the top). Every
// package has a rule — its floor and what it may import — and a rule may
// allow only packages on lower floors, so no arrow runs back up; a package
// without a rule fails the test. They also check that the binaries run on
// every claim and check (loopctl, loop-gate) link no daemon part — no NATS,
// no html/template, no MCP SDK, no chromedp — by asking `go list -deps`
// (skipped when the go tool is not on PATH).
package layering
