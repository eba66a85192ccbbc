package integrations

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A baseUrl carrying credentials is refused without printing them (issue 9,
// item 7): errors are shown on terminals and written to logs.
func TestBaseURLErrorsDoNotPrintSecrets(t *testing.T) {
	for _, raw := range []string{
		"https://dana:hunter2-secret@api.example.com",
		"https://dana:hunter2-secret@api.example.com/v3?token=hunter2-secret",
		"https://api.example.com/v3?access_token=hunter2-secret",
		"https://api.example.com/#hunter2-secret",
		"https://dana:hunter2-secret@[::1:bad",
		"dana:hunter2-secret@api.example.com",
	} {
		t.Run(raw, func(t *testing.T) {
			for _, provider := range []string{"github", "slack", "jira"} {
				_, err := DecodeConfig(map[string]any{provider: map[string]any{"api": map[string]any{"baseUrl": raw}}})
				require.Error(t, err, provider)
				require.NotContains(t, err.Error(), "hunter2", provider)
				require.Contains(t, err.Error(), "baseUrl", provider)
			}
		})
	}
}
