package graph_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/graph/graphfile"
)

func paramRegistry() *graph.Registry {
	reg := graph.NewRegistry()
	pass := func(context.Context, *graph.HookContext) graph.HookResult { return graph.Pass(nil) }
	reg.Register(graph.HookSpec{Name: "typed", Run: pass, Params: []graph.Param{
		{Name: "s", Type: graph.ParamString},
		{Name: "ss", Type: graph.ParamStrings},
		{Name: "b", Type: graph.ParamBool},
		{Name: "i", Type: graph.ParamInt},
		{Name: "d", Type: graph.ParamDuration},
		{Name: "m", Type: graph.ParamMap},
		{Name: "a", Type: graph.ParamAny},
		{Name: "need", Type: graph.ParamString, Required: true},
	}})
	reg.Register(graph.HookSpec{Name: "none", Run: pass, Params: graph.NoParams})
	reg.Register(graph.HookSpec{Name: "undeclared", Run: pass})
	return reg
}

func TestCompileChecksHookParameters(t *testing.T) {
	const tmpl = "nodes:\n  - id: a\n    exit:\n      - hook: %s\n        with: {%s}\n  - id: z\n    terminal: true\nedges:\n  - {from: a, on: pass, to: z}\n"
	for _, tc := range []struct {
		name, hook, with string
		wantErr          []string
	}{
		{"all types right", "typed", "need: x, s: y, ss: [p, q], b: true, i: 3, d: 45s, m: {k: v}, a: [1, {x: 2}]", nil},
		{"strings as one string, duration as seconds", "typed", "need: x, ss: one, d: 90", nil},
		{"unknown key names hook, node, key and valid keys", "typed", "need: x, sectoins: [A]",
			[]string{"node 'a'", "hook 'typed'", "no parameter 'sectoins'", "valid parameters are: a, b, d, i, m, need, s, ss"}},
		{"bool given as string", "typed", "need: x, b: \"yes\"", []string{"parameter 'b' must be true or false, not a string"}},
		{"int given as fraction", "typed", "need: x, i: 1.5", []string{"parameter 'i' must be a whole number, not a number"}},
		{"bad duration", "typed", "need: x, d: soon", []string{"parameter 'd' must be a duration"}},
		{"list of non-strings", "typed", "need: x, ss: [1, 2]", []string{"parameter 'ss' must be a string or a list of strings, not a list"}},
		{"map given as list", "typed", "need: x, m: [1]", []string{"parameter 'm' must be a mapping, not a list"}},
		{"required missing", "typed", "s: y", []string{"needs parameter 'need' (a string)"}},
		{"every problem at once", "typed", "b: 1, zz: 2", []string{"no parameter 'zz'", "parameter 'b' must be", "needs parameter 'need'"}},
		{"a hook taking none refuses any key", "none", "x: 1", []string{"hook 'none' has no parameter 'x'; valid parameters are: (none"}},
		{"undeclared hooks pass values through", "undeclared", "anything: [1]", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := graphfile.Load("g.yaml", fmt.Appendf(nil, tmpl, tc.hook, tc.with), paramRegistry())
			if tc.wantErr == nil {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			for _, w := range tc.wantErr {
				require.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestRegistryRefusesMalformedParamDeclarations(t *testing.T) {
	pass := func(context.Context, *graph.HookContext) graph.HookResult { return graph.Pass(nil) }
	for _, ps := range [][]graph.Param{
		{{Name: "", Type: graph.ParamString}},
		{{Name: "x", Type: graph.ParamString}, {Name: "x", Type: graph.ParamBool}},
		{{Name: "x", Type: "float"}},
	} {
		require.Panics(t, func() { graph.NewRegistry().Register(graph.HookSpec{Name: "h", Run: pass, Params: ps}) })
	}
	reg := graph.NewRegistry()
	reg.Register(graph.HookSpec{Name: "h", Run: pass, Params: graph.NoParams})
	spec, _ := reg.Lookup("h")
	require.True(t, spec.ParamsDeclared(), "NoParams survives registration as a declaration")
}
