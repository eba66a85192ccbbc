package main

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/theloop-dev/theloop/loop/api"
)

// loopctl attention is the dashboard's "needs you" from the shell: what
// waits on a human across work items, oldest first, with why and for how
// long. loopd builds the list (GET /api/v1/attention); this maps flags to
// that one call and prints a table, or the API's JSON.

func newAttentionCmd(f *Factory) *cli.Command {
	return &cli.Command{
		Name:  "attention",
		Usage: `what waits on a human ("needs you"), oldest first, with why and for how long`,
		Description: `Asks the running loopd over its control socket. The kinds: ` + strings.Join(api.AttentionKinds, ", ") + `
(gate: a node waiting for an authorized person's decision; question: the agent asked
with loopctl ask; capacity: a cluster node declined the item for capacity).

Examples:
   loopctl attention
   loopctl attention --kind gate --kind question
   loopctl attention --jq '.[] | select(.waitingSeconds > 3600) | .ref'`,
		Flags: append(serviceFlags(), &cli.StringSliceFlag{Name: "kind", Usage: "only this kind (repeatable): " + strings.Join(api.AttentionKinds, ", ")}),
		Action: func(c *cli.Context) error {
			o, err := readServiceOptions(f, c)
			if err != nil {
				return err
			}
			var q url.Values
			if k := c.StringSlice("kind"); len(k) > 0 {
				q = url.Values{"kind": k}
			}
			var items []api.AttentionItem
			printed, err := o.call(c.Context, "GET", api.AttentionPath, q, nil, &items)
			if err != nil || printed {
				return err
			}
			if len(items) == 0 {
				_, err := fmt.Fprintln(f.IO.Out, "nothing waits on you")
				return err
			}
			on := f.colour(f.IO.Out)
			tw := newTable(f.IO.Out, on)
			tw.head("WAITING\tKIND\tWORK ITEM\tSINCE\tWHY", 1)
			for _, it := range items {
				since := "-"
				if !it.Since.IsZero() {
					since = it.Since.UTC().Format(time.RFC3339)
				}
				tw.row("%s\t%s\t%s\t%s\t%s\n", waited(it.WaitingSeconds), paintKind(on, it.Kind), it.Ref, since, clipLine(it.Why, 120))
			}
			return tw.flush()
		},
	}
}

// paintKind colours a kind when on: what is broken (a dead session, a
// failed spawn) red, what waits on a decision or an answer yellow, the
// rest plain — every cell wrapped alike so the table stays aligned.
func paintKind(on bool, kind string) string {
	if !on {
		return kind
	}
	c := sgrPlain
	switch kind {
	case "dead-session", "spawn-failed":
		c = sgrRed
	case "gate", "question":
		c = sgrYellow
	}
	return c + kind + sgrReset
}

// waited renders a wait as the dashboard does: 45s, 12m, 3h05m, 2d04h.
func waited(sec float64) string {
	d := time.Duration(max(0, sec)) * time.Second
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
	return fmt.Sprintf("%dd%02dh", int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour))
}

// clipLine keeps a reason on its row: newlines and tabs become spaces (a
// question can span lines; a tab would break the table) and it is cut
// at n runes.
func clipLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
