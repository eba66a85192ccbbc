package run_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/run"
)

// A relative program path is taken from Cmd.Dir — `tools/mdlint` declared in
// a graph runs from the repository root, wherever the caller runs — and a
// bare name is still looked up on PATH.
func TestExecRelativeProgramIsTakenFromDir(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "tools"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tools", "hello"), []byte("#!/bin/sh\necho hello from \"$PWD\"\n"), 0o755))
	for _, name := range []string{"tools/hello", "./tools/hello"} {
		res, err := run.Exec{}.Run(context.Background(), run.Cmd{Name: name, Dir: dir})
		require.NoError(t, err, name)
		require.Equal(t, "hello from "+dir+"\n", string(res.Stdout), name)
	}
	_, err := run.Exec{}.Run(context.Background(), run.Cmd{Name: "tools/hello", Dir: t.TempDir()})
	require.True(t, errors.Is(err, run.ErrNotFound), "a relative program missing in Dir is not found: %v", err)
	res, err := run.Exec{}.Run(context.Background(), run.Cmd{Name: "sh", Args: []string{"-c", "echo ok"}, Dir: dir})
	require.NoError(t, err)
	require.Equal(t, "ok\n", string(res.Stdout))
}
