package agent_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	demoagent "github.com/theloop-dev/theloop/loop/demo/agent"
)

func TestReviseKeepsTheLockAndTheReview(t *testing.T) {
	const (
		lock   = "---\nstatus: approved\ndecision: \"design-approval/7\"\n---\n"
		review = "## Review comments\n\n### 2026-01-02 — approved\n\n**@dana** wrote:\n\nLGTM\n"
		v1     = "# Plan\n\n## Results\n\nPending.\n"
		v2     = "# Plan\n\n## Results\n\nAll pass.\n"
	)
	cases := []struct {
		name, old, body, want string
	}{
		{"a new file is written as is", "", v1, v1},
		{"a draft is replaced", v1, v2, v2},
		{"the lock stays", lock + v1, v2, lock + v2},
		{"lock and review stay; the review goes last", lock + v1 + "\n" + review, v2, lock + v2 + "\n" + review},
		{"a review in the middle is carried to the end", lock + "# Plan\n\n" + review + "\n## Results\n\nPending.\n", v2, lock + v2 + "\n" + review},
		{"a body that already has its review is not doubled", lock + v1 + "\n" + review, v2 + "\n" + review, lock + v2 + "\n" + review},
		{"a heading inside a code fence is not the section", "```\n## Review comments\n```\n", v2, v2},
		{"the agent's own front matter wins", lock + v1, "---\nstatus: draft\n---\n" + v2, "---\nstatus: draft\n---\n" + v2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, demoagent.Revise(tc.old, tc.body))
		})
	}
}
