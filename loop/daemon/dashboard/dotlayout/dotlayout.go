// Package dotlayout lays out a graph written in DOT with Graphviz's dot
// engine (github.com/goccy/go-graphviz: Graphviz compiled to WebAssembly,
// run by wazero; no cgo) and returns Graphviz's json0 output: node centres
// and sizes, edge splines and label positions.
//
// It is linked only by cmd/loop-layout, never by loopd: go-graphviz
// compiles and instantiates its WebAssembly module in a package init, which
// costs every process that links it ~40 MB of anonymous memory and about a
// second of CPU at start, whether it ever lays out a graph or not. loopd
// runs loop-layout when a graph page is served, once per graph (the
// dashboard caches the result per graph hash).
package dotlayout

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	graphviz "github.com/goccy/go-graphviz"
)

// MaxInput bounds the DOT text Layout accepts: the dashboard's largest
// graphs are a few kilobytes.
const MaxInput = 1 << 20

// Layout lays dot out with the dot engine and returns the json0 rendering.
func Layout(ctx context.Context, dot []byte) ([]byte, error) {
	if len(dot) > MaxInput {
		return nil, fmt.Errorf("dotlayout: the graph is %d bytes, more than %d", len(dot), MaxInput)
	}
	gv, err := graphviz.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("dotlayout: starting graphviz: %w", err)
	}
	defer gv.Close()
	g, err := graphviz.ParseBytes(dot)
	if err != nil {
		return nil, fmt.Errorf("dotlayout: parsing the graph: %w", err)
	}
	defer g.Close()
	var out bytes.Buffer
	if err := gv.Render(ctx, g, "json0", &out); err != nil {
		return nil, fmt.Errorf("dotlayout: laying out the graph: %w", err)
	}
	return out.Bytes(), nil
}

// Main is loop-layout: DOT on stdin, json0 on stdout, an error on stderr
// with exit code 1.
func Main(stdin io.Reader, stdout, stderr io.Writer) int {
	dot, err := io.ReadAll(io.LimitReader(stdin, MaxInput+1))
	if err == nil && len(dot) > MaxInput {
		err = errors.New("dotlayout: the graph on stdin is larger than 1 MiB")
	}
	var out []byte
	if err == nil {
		out, err = Layout(context.Background(), dot)
	}
	if err == nil {
		_, err = stdout.Write(out)
	}
	if err != nil {
		fmt.Fprintln(stderr, "loop-layout:", err)
		return 1
	}
	return 0
}
