package loop

import (
	"context"
	"errors"
	"fmt"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/run"
)

// Commands runs programs for hooks (verify-tests, an external linter)
// through the one command runner, in the repository root unless a hook asks
// for another directory. It is handed to live chains only: check never
// starts a program.
type Commands struct {
	Runner run.Runner
	Root   string
}

// Run implements graph.Commands.
func (c Commands) Run(ctx context.Context, argv []string, dir string) (graph.CommandResult, error) {
	if len(argv) == 0 {
		return graph.CommandResult{}, errors.New("empty command")
	}
	if dir == "" {
		dir = c.Root
	}
	res, err := c.Runner.Run(ctx, run.Cmd{Name: argv[0], Args: argv[1:], Dir: dir})
	out := graph.CommandResult{Stdout: res.Stdout, Stderr: res.Stderr, ExitCode: res.ExitCode}
	var ee *run.ExitError
	switch {
	case err == nil, errors.As(err, &ee):
		return out, nil
	case errors.Is(err, run.ErrNotFound):
		return out, fmt.Errorf("%s: %w", argv[0], graph.ErrCommandNotFound)
	}
	return out, err
}

var _ graph.Commands = Commands{}
