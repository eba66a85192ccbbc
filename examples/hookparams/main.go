// Command hookparams shows a hook that declares its parameters: the graph
// that spells them right compiles, and one with a misspelled key fails when
// it loads — naming the node, the hook, the key and the valid keys — instead
// of silently dropping the check.
//
//	go run ./examples/hookparams
package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/graph/graphfile"
)

// wordLimit would block an artifact longer than `max` words; its body is
// beside the point here.
func wordLimit(_ context.Context, hc *graph.HookContext) graph.HookResult {
	if hc.Params.Int("max", 0) <= 0 {
		return graph.Skip("no limit")
	}
	return graph.Pass(nil)
}

func registry() *graph.Registry {
	reg := graph.NewRegistry()
	reg.Register(graph.HookSpec{
		Name:    "word-limit",
		Run:     wordLimit,
		Summary: "the node's artifact stays under a word count",
		Params: []graph.Param{
			{Name: "max", Type: graph.ParamInt, Required: true, Summary: "the most words allowed"},
			{Name: "ignoreCode", Type: graph.ParamBool, Summary: "do not count code blocks"},
		},
	})
	return reg
}

const graphYAML = `
name: notes
nodes:
  - id: draft
    produces: notes.md
    exit:
      - hook: word-limit
        with: {%s}
  - id: done
    terminal: true
edges:
  - {from: draft, on: pass, to: done}
`

func run(out io.Writer) error {
	reg := registry()
	for _, with := range []string{
		"max: 500, ignoreCode: true", // right
		"max: 500, ignoreCdoe: true", // misspelled key
		"max: lots",                  // mistyped value
		"ignoreCode: true",           // required key missing
	} {
		_, err := graphfile.Load("notes.yaml", fmt.Appendf(nil, graphYAML, with), reg)
		if err != nil {
			fmt.Fprintf(out, "with {%s}:\n%v\n", with, err)
			continue
		}
		fmt.Fprintf(out, "with {%s}: compiles\n", with)
	}
	return nil
}

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
