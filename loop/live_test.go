package loop_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/loop"
)

func noHome() (string, error) { return "", os.ErrNotExist }

func noEnv(string) (string, bool) { return "", false }

// OpenLive refuses a bad config or work item before anything is written,
// takes a relative event log relative to the repository, and records the
// runtime's events there as source "cli".
func TestOpenLive(t *testing.T) {
	repo := t.TempDir()
	writeFile(t, repo, ".the-loop/harness-config.yaml", harnessConfig)
	writeFile(t, repo, "docs/specs/issue-42/execution-log.md", "# Execution log\n")
	writeFile(t, repo, "cli.yaml", "version: \"0.5.0\"\neventLog: {enabled: true, path: logs/events.jsonl}\n")
	src := loop.CLIConfigSource{Path: filepath.Join(repo, "cli.yaml"), LookupEnv: noEnv, HomeDir: noHome}

	tests := []struct {
		name string
		opts loop.LiveOptions
		what string
		is   error
	}{
		{"missing config", loop.LiveOptions{Config: loop.CLIConfigSource{Path: filepath.Join(repo, "nope.yaml"), LookupEnv: noEnv, HomeDir: noHome}, WorkItem: "issue-42"}, "config", loop.ErrInvalidConfig},
		{"unknown work item", loop.LiveOptions{Config: src, WorkItem: "issue-7"}, "work item", loop.ErrNoSuchWorkItem},
		{"invalid id with create", loop.LiveOptions{Config: src, WorkItem: "issue 7", Create: true}, "work item", loop.ErrInvalidID},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loop.OpenLive(repo, tc.opts)
			var in *loop.LiveInputError
			require.ErrorAs(t, err, &in)
			require.Equal(t, tc.what, in.What)
			require.ErrorIs(t, err, tc.is)
			require.NoDirExists(t, filepath.Join(repo, "logs"), "nothing written before the refusal")
		})
	}

	var warned []string
	var gotSink graph.Sink
	lr, err := loop.OpenLive(repo, loop.LiveOptions{
		Config: src, WorkItem: "issue-9", Create: true,
		Integrations: func(cfg *loop.CLIConfig, sink graph.Sink) (graph.Integrations, []string, error) {
			gotSink = sink
			return nil, []string{"integrations: offline"}, nil
		},
		Warn: func(w string) { warned = append(warned, w) },
	})
	require.NoError(t, err)
	require.Equal(t, filepath.Join(repo, "logs", "events.jsonl"), lr.Config.EventLogPath)
	require.NotNil(t, gotSink, "the integrations get the event log")
	require.Equal(t, []string{"integrations: offline"}, warned)
	require.Empty(t, lr.Warnings, "with Warn set nothing is kept")
	_, err = lr.Runtime.Status(context.Background(), "issue-9", false)
	require.NoError(t, err)
	require.NoError(t, lr.Close())
	require.FileExists(t, filepath.Join(repo, "logs", "events.jsonl"))
}
