package daemon

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/ingress"
)

func TestDroppedEventsAreLoggedRateLimited(t *testing.T) {
	var out bytes.Buffer
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC) // a fake clock, private to this log
	l := newDropLog(&out, func() time.Time { return now }, time.Minute)
	drop := func(reason, actor string) {
		l.Emit(graph.LogEvent{Name: ingress.EventDropped, Fields: []graph.Field{
			{Key: "reason", Value: reason}, {Key: "gh_event", Value: "issue_comment"}, {Key: "actor", Value: actor}}})
	}
	lines := func() []string { return strings.Split(strings.TrimSpace(out.String()), "\n") }

	drop("repository-not-bound", "alice")
	require.Len(t, lines(), 1, "the first drop of a reason is told at once")
	require.Contains(t, lines()[0], "repository-not-bound")
	require.Contains(t, lines()[0], "actor=alice")

	for i := 0; i < 5000; i++ { // a flood within the minute: no line
		drop("repository-not-bound", "noise")
	}
	l.Emit(graph.LogEvent{Name: "graph.entered"}) // other events never reach it
	require.Len(t, lines(), 1)

	drop("unauthorized-actor", "mallory") // another reason has its own budget
	require.Len(t, lines(), 2)
	require.Contains(t, lines()[1], "unauthorized-actor")

	now = now.Add(61 * time.Second)
	drop("repository-not-bound", "bob")
	require.Len(t, lines(), 3)
	require.Contains(t, lines()[2], "dropped 5001 event(s) in the last 1m1s: repository-not-bound")
}
