package loop

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/workitem"
)

func TestWorkItemRef(t *testing.T) {
	tests := []struct{ id, origin, want string }{
		{"issue-12", "octo/repo", "github:octo/repo#12"},
		{"issue-012", "octo/repo", "github:octo/repo#12"},
		{"issue-12", "octo/.github", "github:octo/.github#12"},
		{"issue-12", "", "issue-12"},
		{"issue-12", "octo/-repo", "issue-12"},
		{"issue-12", "octo/..", "issue-12"},
		{"issue-12", "ghe.corp/octo/repo", "issue-12"},
		{"issue-0", "octo/repo", "issue-0"},
		{"issue-2147483648", "octo/repo", "issue-2147483648"},
		{"feature-x", "octo/repo", "feature-x"},
	}
	for _, tt := range tests {
		t.Run(tt.id+"@"+tt.origin, func(t *testing.T) {
			got := WorkItemRef(tt.id, tt.origin)
			require.Equal(t, tt.want, got)
			if got != tt.id {
				_, err := workitem.Parse(got)
				require.NoError(t, err, "a derived ref parses with the one parser")
			}
		})
	}
}
