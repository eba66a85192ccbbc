// Command embed shows how another Go program embeds theloop's process
// kernel: it declares a three-node graph in YAML, registers one custom hook,
// runs graph.Runtime over in-memory state and artifacts (graph/graphtest),
// and walks a work item from start to the terminal node — blocked once,
// waiting at a human gate, then approved.
//
//	go run ./examples/embed
package main

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/graph/graphfile"
	"github.com/theloop-dev/theloop/graph/graphtest"
)

const releaseLoop = `
name: release-loop
start: draft
nodes:
  - id: draft
    produces: notes.md
    exit:
      - hook: has-heading
        with: {heading: Changes}
  - id: sign-off
    actor: human
    exit: [approve]
  - id: shipped
    terminal: true
edges:
  - {from: draft, on: pass, to: sign-off}
  - {from: sign-off, on: approved, to: shipped}
  - {from: sign-off, on: changes-requested, to: draft}
`

// hasHeading blocks until the node's artifact carries a "## <heading>" line.
func hasHeading(_ context.Context, hc *graph.HookContext) graph.HookResult {
	want := "## " + hc.Params.String("heading")
	name := hc.Node.Produces[0]
	body, err := fs.ReadFile(hc.Artifacts, name)
	if err != nil {
		return graph.Block(graph.Finding("required artifact is missing", hc.Artifacts.Path(name)))
	}
	if !strings.Contains(string(body), want) {
		return graph.Block(graph.Finding("required section is missing: "+hc.Params.String("heading"), hc.Artifacts.Path(name)))
	}
	return graph.Pass(nil)
}

// approve reads only the inbound event: an authorized "approved" passes
// with the outcome the edges route on; anything else waits.
func approve(_ context.Context, hc *graph.HookContext) graph.HookResult {
	if hc.Event == nil {
		return graph.Wait("no authorized feedback yet")
	}
	for _, c := range hc.Event.Comments {
		if c.Author == "release-manager" && strings.Contains(strings.ToLower(c.Body), "approved") {
			res := graph.PassWith("approved", nil)
			// Who decided: the runtime records it with the gate's verdict.
			res.Decision = &graph.DecisionFact{By: "@" + c.Author, Comment: c.ID}
			return res
		}
	}
	return graph.Wait("feedback so far is not decisive; the gate stays open")
}

func run(out io.Writer) error {
	reg := graph.NewRegistry()
	reg.Register(graph.HookSpec{Name: "has-heading", Run: hasHeading, Summary: "the artifact has a ## heading",
		Params: []graph.Param{{Name: "heading", Type: graph.ParamString, Required: true, Summary: "the heading text, without ##"}}})
	reg.Register(graph.HookSpec{Name: "approve", Run: approve, Summary: "a release manager approved", Params: graph.NoParams})
	g, err := graphfile.Load("release-loop.yaml", []byte(releaseLoop), reg)
	if err != nil {
		return err
	}
	items := graphtest.NewItems()
	rt, err := graph.New(g, graph.Options{Store: graphtest.NewStore(), Items: items, Clock: &graphtest.Clock{}})
	if err != nil {
		return err
	}
	ctx := context.Background()
	const id = "release-7"
	show := func(step string, status graph.Status, node string, msgs []string) {
		fmt.Fprintf(out, "%-28s %-7s at %s\n", step, status, node)
		for _, m := range msgs {
			fmt.Fprintf(out, "    %s\n", m)
		}
	}

	start, err := rt.Start(ctx, id)
	if err != nil {
		return err
	}
	show("start", start.Status, start.CurrentNode, nil)

	items.Artifacts(id).Set("notes.md", "# Release 7\n")
	c, err := rt.Complete(ctx, id, "", "agent")
	if err != nil {
		return err
	}
	show("claim draft (no section)", c.Status, c.CurrentNode, c.Messages)

	items.Artifacts(id).Set("notes.md", "# Release 7\n\n## Changes\n\n- faster\n")
	c, err = rt.Complete(ctx, id, "", "agent")
	if err != nil {
		return err
	}
	show("claim draft", c.Status, c.CurrentNode, c.Messages)

	c, err = rt.Complete(ctx, id, "", "agent")
	if err != nil {
		return err
	}
	show("claim the human gate", c.Status, c.CurrentNode, nil)

	ev := &graph.Event{ID: "evt-1", Comments: []graph.Comment{{ID: "c-9", Author: "release-manager", Body: "Approved, ship it"}}}
	step, err := rt.Advance(ctx, id, ev)
	if err != nil {
		return err
	}
	show("approval arrives", step.Status, step.CurrentNode, step.Messages)

	rep, err := rt.Status(ctx, id, true)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "check --recompute: current=%s ok=%v\n", rep.CurrentNode, rep.OK)
	for _, n := range rep.Nodes {
		fmt.Fprintf(out, "    %-9s %s\n", n.Node, n.Status)
	}
	return nil
}

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "embed:", err)
		os.Exit(1)
	}
}
