// Command gengraphs regenerates loop/graphs/*.json from loop/graphs/*.yaml:
// it parses and schema-validates each shipped graph and writes its JSON form,
// which theloop embeds so that starting a process costs no YAML parse.
//
//	go generate ./loop
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/graph/graphfile"
	"github.com/theloop-dev/theloop/hooks"
)

func main() {
	dir := "graphs"
	if len(os.Args) > 1 {
		dir = os.Args[1]
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		fmt.Fprintf(os.Stderr, "gengraphs: no graphs in %s\n", dir)
		os.Exit(1)
	}
	reg := hooks.NewRegistry()
	for _, path := range files {
		src, err := os.ReadFile(path)
		if err != nil {
			fail(err)
		}
		f, err := graphfile.Parse("loop/"+filepath.ToSlash(path), src)
		if err != nil {
			fail(err)
		}
		if _, err := graph.Compile(f, reg); err != nil {
			fail(err)
		}
		out, err := graph.MarshalFile(f)
		if err != nil {
			fail(err)
		}
		if err := os.WriteFile(strings.TrimSuffix(path, ".yaml")+".json", out, 0o644); err != nil {
			fail(err)
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "gengraphs:", err)
	os.Exit(1)
}
