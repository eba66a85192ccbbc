package run_test

import (
	"bufio"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/run"
)

// A started program answers on its pipes until Stop, which ends it even
// when it ignores its closed input; Stop twice is harmless.
func TestExecStartTalksAndStops(t *testing.T) {
	p, err := run.Exec{Environ: func() []string { return []string{"GREETING=hi"} }}.Start(run.Cmd{Name: "sh", Args: []string{"-c", `read x; echo "$GREETING $x"; trap '' TERM; while :; do sleep 1; done`}})
	require.NoError(t, err)
	_, err = io.WriteString(p.Stdin, "there\n")
	require.NoError(t, err)
	line, err := bufio.NewReader(p.Stdout).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "hi there\n", line)
	p.Stop()
	p.Stop()

	_, err = run.Exec{}.Start(run.Cmd{Name: "theloop-no-such-program"})
	require.ErrorIs(t, err, run.ErrNotFound)
}
