package main

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/ops"
)

// demoTickets is the in-process ticket `loopctl demo` walks against: the
// comments and labels of its one issue and a Slack channel, answering the
// operations the shipped graphs' hooks call. It is not graph/graphtest's
// Tickets because a binary links no test double (and graphtest brings
// testing/fstest with it).
type demoTickets struct {
	mu       sync.Mutex
	comments map[string][]map[string]any
	labels   map[string][]string
	nextID   int
	posted   int
}

func newDemoTickets() *demoTickets {
	return &demoTickets{comments: map[string][]map[string]any{}, labels: map[string][]string{}}
}

// Comment adds a human's comment and returns it as the ingress would hand
// it to the runtime.
func (t *demoTickets) Comment(ref, author, body string) graph.Comment {
	t.mu.Lock()
	defer t.mu.Unlock()
	id := t.add(ref, author, body)
	return graph.Comment{ID: id, Author: author, Body: body}
}

func (t *demoTickets) add(ref, author, body string) string {
	t.nextID++
	id := fmt.Sprintf("%d", t.nextID)
	t.comments[ref] = append(t.comments[ref], map[string]any{"id": id, "author": author, "body": body, "url": "https://tickets.test/" + id})
	return id
}

// Labels returns the ticket's labels, sorted.
func (t *demoTickets) Labels(ref string) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := slices.Clone(t.labels[ref])
	sort.Strings(out)
	return out
}

// Posted is how many comments theloop posted.
func (t *demoTickets) Posted() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.posted
}

// Call implements graph.Integrations; an operation the demo's hooks never
// call answers graph.ErrUnsupportedOperation, as an unconfigured provider
// would.
func (t *demoTickets) Call(ctx context.Context, op graph.Operation, args map[string]any) (map[string]any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	v := graph.Values(args)
	ref := v.String("ref")
	switch op {
	case ops.GitHubAddComment:
		t.posted++
		id := t.add(ref, "the-loop-bot", v.String("body"))
		return map[string]any{"id": id, "url": "https://tickets.test/" + id}, nil
	case ops.GitHubListComments:
		out := make([]any, len(t.comments[ref]))
		for i, c := range t.comments[ref] {
			out[i] = c
		}
		return map[string]any{"comments": out}, nil
	case ops.GitHubGetLabels:
		return map[string]any{"labels": anySlice(t.labels[ref])}, nil
	case ops.GitHubSetLabels:
		prefix, want := v.String("replacePrefix"), v.Strings("labels")
		var keep []string
		for _, l := range t.labels[ref] {
			if prefix == "" || !strings.HasPrefix(l, prefix) || slices.Contains(want, l) {
				keep = append(keep, l)
			}
		}
		for _, l := range want {
			if !slices.Contains(keep, l) {
				keep = append(keep, l)
			}
		}
		t.labels[ref] = keep
		return map[string]any{"labels": anySlice(keep)}, nil
	case ops.SlackPostMessage:
		return map[string]any{}, nil
	}
	return nil, fmt.Errorf("%s: %w", op, graph.ErrUnsupportedOperation)
}

func anySlice(s []string) []any {
	out := make([]any, len(s))
	for i, x := range s {
		out[i] = x
	}
	return out
}

var _ graph.Integrations = (*demoTickets)(nil)
