package graph

import (
	"errors"
	"fmt"
	"strings"
)

// Problem is one thing wrong with a graph file.
type Problem struct {
	// Where is "<file>:<line>:<col>" (or just the file when the position is
	// unknown).
	Where string
	// Path locates the offending element, e.g. "nodes[3].exit[0]".
	Path string
	// Message says what is wrong and, where it can, how to fix it.
	Message string
}

func (p Problem) String() string {
	if p.Where == "" {
		return p.Message
	}
	return p.Where + ": " + p.Message
}

// LoadError reports every problem found while parsing or compiling a graph.
type LoadError struct {
	Source   string
	Problems []Problem
}

func (e *LoadError) Error() string {
	var b strings.Builder
	src := e.Source
	if src == "" {
		src = "graph"
	}
	if len(e.Problems) == 1 {
		fmt.Fprintf(&b, "invalid graph %s: %s", src, e.Problems[0])
		return b.String()
	}
	fmt.Fprintf(&b, "invalid graph %s: %d problems:", src, len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n  - ")
		b.WriteString(p.String())
	}
	return b.String()
}

// ErrInvalidGraph is matched (errors.Is) by every *LoadError.
var ErrInvalidGraph = errors.New("invalid graph")

// Is lets errors.Is(err, ErrInvalidGraph) match.
func (e *LoadError) Is(target error) bool { return target == ErrInvalidGraph }
