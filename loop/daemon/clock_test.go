package daemon_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/graph/graphtest"
	"github.com/theloop-dev/theloop/loop/daemon"
	"github.com/theloop-dev/theloop/loop/daemon/apiserver"
	"github.com/theloop-dev/theloop/loop/daemon/mcpserver"
	"github.com/theloop-dev/theloop/loop/daemon/metrics"
	"github.com/theloop-dev/theloop/loop/daemon/outbox"
	"github.com/theloop-dev/theloop/workitem"
)

// Every part that reads time is handed the daemon's clock: one left out is
// an error that names it, never a silent wall clock beside a fake one.
func TestAClockIsRequired(t *testing.T) {
	cfg := daemon.DefaultConfig()
	cfg.StateRoot = t.TempDir()
	cfg.InsecureAcceptUnsigned = true
	_, err := daemon.New(cfg, daemon.Deps{})
	require.ErrorContains(t, err, "Deps.Clock")
	_, err = daemon.New(cfg, daemon.Deps{Clock: graph.SystemClock{}})
	require.NoError(t, err)

	_, err = metrics.New(metrics.Config{})
	require.ErrorContains(t, err, "Config.Clock")
	_, err = apiserver.New(apiserver.Config{}, apiserver.Backend{})
	require.ErrorContains(t, err, "Config.Clock")
	_, err = mcpserver.New(mcpserver.Config{})
	require.ErrorContains(t, err, "Config.Clock")
	_, err = outbox.New(outbox.Config{StateRoot: t.TempDir()}, outbox.Deps{Integrations: graphtest.NewTickets(), Sink: &graphtest.Sink{},
		Sessions: outbox.SessionsFunc(func(string) ([]workitem.Ref, error) { return nil, nil })})
	require.ErrorContains(t, err, "Deps.Clock")
}
