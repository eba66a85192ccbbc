package daemon

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/run"
)

// The layout program as loopd runs it: built from cmd/loop-layout, found
// beside nothing but PATH, DOT in, json0 out, its WebAssembly compilation
// cache under loopd's directory, not the shared /tmp.
func TestProgramLayoutRunsLoopLayout(t *testing.T) {
	gotool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go tool is not on PATH: this test builds cmd/loop-layout")
	}
	bin := t.TempDir()
	build := exec.Command(gotool, "build", "-o", filepath.Join(bin, LayoutProgram), "../../cmd/loop-layout")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	prog := findLayoutProgram(bin)
	require.Equal(t, filepath.Join(bin, LayoutProgram), prog)
	require.Empty(t, findLayoutProgram(t.TempDir()+string(filepath.ListSeparator)+"relative/dir"))

	tmp := filepath.Join(t.TempDir(), "cache", "layout")
	p := programLayout{runner: run.Exec{}, path: prog, tmp: tmp}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	js, err := p.Layout(ctx, []byte(`digraph { "a" -> "b" [label="pass"]; }`))
	require.NoError(t, err)
	var lay struct {
		Objects []struct{ Name, Pos string } `json:"objects"`
	}
	require.NoError(t, json.Unmarshal(js, &lay))
	require.Len(t, lay.Objects, 2)
	entries, err := os.ReadDir(tmp)
	require.NoError(t, err)
	require.NotEmpty(t, entries, "the compilation cache is under loopd's directory")
	_, err = p.Layout(ctx, []byte(`digraph { a -> }`))
	require.ErrorContains(t, err, "loop-layout")
}
