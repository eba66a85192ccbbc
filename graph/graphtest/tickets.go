package graphtest

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

// Call is one recorded integration call.
type Call struct {
	Op   graph.Operation
	Args map[string]any
}

// Tickets is an in-process stand-in for the services hooks talk to: GitHub
// tickets (comments and labels, per ref) and a Slack channel. It implements
// graph.Integrations with the operations theloop's hooks use (package ops),
// records every call, and can be told to fail. Unknown operations answer
// graph.ErrUnsupportedOperation, as an unconfigured provider would.
type Tickets struct {
	mu       sync.Mutex
	comments map[string][]map[string]any
	labels   map[string][]string
	slack    []string
	calls    []Call
	nextID   int
	fail     map[graph.Operation]error
	failAll  error
}

// NewTickets returns an empty stand-in.
func NewTickets() *Tickets {
	return &Tickets{comments: map[string][]map[string]any{}, labels: map[string][]string{}, fail: map[graph.Operation]error{}}
}

// Fail makes op (or every operation, when op is "") return err; nil clears.
func (t *Tickets) Fail(op graph.Operation, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if op == "" {
		t.failAll = err
		return
	}
	if err == nil {
		delete(t.fail, op)
		return
	}
	t.fail[op] = err
}

// Comment adds a human's comment to a ticket and returns it as an event
// comment (what the ingress would hand the runtime).
func (t *Tickets) Comment(ref, author, body string) graph.Comment {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.nextID++
	id := fmt.Sprintf("%d", t.nextID)
	t.comments[ref] = append(t.comments[ref], map[string]any{"id": id, "author": author, "body": body, "url": "https://tickets.test/" + id})
	return graph.Comment{ID: id, Author: author, Body: body}
}

// Comments returns a ticket's comment bodies in order.
func (t *Tickets) Comments(ref string) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for _, c := range t.comments[ref] {
		out = append(out, c["body"].(string))
	}
	return out
}

// Labels returns a ticket's labels, sorted.
func (t *Tickets) Labels(ref string) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := append([]string(nil), t.labels[ref]...)
	sort.Strings(out)
	return out
}

// SetLabels replaces a ticket's labels (test setup).
func (t *Tickets) SetLabels(ref string, labels ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.labels[ref] = append([]string(nil), labels...)
}

// Slack returns the messages posted to the channel.
func (t *Tickets) Slack() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.slack...)
}

// Calls returns every call made, in order.
func (t *Tickets) Calls() []Call {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Call(nil), t.calls...)
}

// CallsOf returns the calls of one operation.
func (t *Tickets) CallsOf(op graph.Operation) []Call {
	var out []Call
	for _, c := range t.Calls() {
		if c.Op == op {
			out = append(out, c)
		}
	}
	return out
}

// Call implements graph.Integrations.
func (t *Tickets) Call(ctx context.Context, op graph.Operation, args map[string]any) (map[string]any, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.calls = append(t.calls, Call{Op: op, Args: args})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if t.failAll != nil {
		return nil, t.failAll
	}
	if err := t.fail[op]; err != nil {
		return nil, err
	}
	v := graph.Values(args)
	ref := v.String("ref")
	switch op {
	case ops.GitHubAddComment:
		t.nextID++
		id := fmt.Sprintf("%d", t.nextID)
		t.comments[ref] = append(t.comments[ref], map[string]any{"id": id, "author": "the-loop-bot", "body": v.String("body"), "url": "https://tickets.test/" + id})
		return map[string]any{"id": id, "url": "https://tickets.test/" + id}, nil
	case ops.GitHubListComments:
		out := make([]any, len(t.comments[ref]))
		for i, c := range t.comments[ref] {
			out[i] = c
		}
		return map[string]any{"comments": out}, nil
	case ops.GitHubGetLabels:
		out := make([]any, len(t.labels[ref]))
		for i, l := range t.labels[ref] {
			out[i] = l
		}
		return map[string]any{"labels": out}, nil
	case ops.GitHubSetLabels:
		prefix := v.String("replacePrefix")
		want := v.Strings("labels")
		var keep []string
		for _, l := range t.labels[ref] {
			if prefix != "" && strings.HasPrefix(l, prefix) && !slices.Contains(want, l) {
				continue
			}
			keep = append(keep, l)
		}
		for _, l := range want {
			if !slices.Contains(keep, l) {
				keep = append(keep, l)
			}
		}
		t.labels[ref] = keep
		out := make([]any, len(keep))
		for i, l := range keep {
			out[i] = l
		}
		return map[string]any{"labels": out}, nil
	case ops.SlackPostMessage:
		t.slack = append(t.slack, v.String("text"))
		return map[string]any{}, nil
	}
	return nil, fmt.Errorf("%s: %w", op, graph.ErrUnsupportedOperation)
}

var _ graph.Integrations = (*Tickets)(nil)
