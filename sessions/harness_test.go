package sessions

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestClaudeCodeArgv(t *testing.T) {
	c := &ClaudeCode{Args: []string{"--permission-mode", "acceptEdits"}}
	const id = "0b5a3c1e-1f2a-4b3c-8d4e-5f6a7b8c9d0e"

	argv, err := c.Interactive(id)
	require.NoError(t, err)
	require.Equal(t, []string{"--session-id", id, "--permission-mode", "acceptEdits"}, argv)

	argv, err = c.Resume(id)
	require.NoError(t, err)
	require.Equal(t, []string{"--resume", id, "--permission-mode", "acceptEdits"}, argv)

	for _, bad := range []string{"", "-x", "--dangerously-skip-permissions", "a b", "x;"} {
		_, err := c.Resume(bad)
		require.ErrorIs(t, err, ErrInvalidName, bad)
		_, err = c.Interactive(bad)
		require.ErrorIs(t, err, ErrInvalidName, bad)
	}

	cmd, err := c.OneShot("review this", "haiku")
	require.NoError(t, err)
	require.Equal(t, "claude", cmd.Name)
	require.Equal(t, []string{"-p", "--output-format", "json", "--permission-mode", "acceptEdits", "--model", "haiku"}, cmd.Args)
	require.Equal(t, "review this", string(cmd.Stdin), "the prompt travels on stdin, not argv")
	_, err = c.OneShot("x", "--evil")
	require.ErrorIs(t, err, ErrUnsafeArgument)
}

func TestHarnessArgsEndingInSemicolonAreRefused(t *testing.T) {
	c := &ClaudeCode{Args: []string{"--append-system-prompt", "be careful;"}}
	_, err := c.Interactive("abc")
	require.ErrorIs(t, err, ErrUnsafeArgument)
	_, err = c.Resume("abc")
	require.ErrorIs(t, err, ErrUnsafeArgument)
}

func TestCursorIsOneShotOnly(t *testing.T) {
	c := &Cursor{Args: []string{"--force"}}
	_, err := c.Interactive("abc")
	require.ErrorIs(t, err, ErrInteractiveUnsupported)
	require.Contains(t, err.Error(), `"claude"`, "the error names the fix")
	_, err = c.Resume("abc")
	require.ErrorIs(t, err, ErrInteractiveUnsupported)

	cmd, err := c.OneShot("review this", "gpt-5")
	require.NoError(t, err)
	require.Equal(t, "cursor-agent", cmd.Name)
	require.Equal(t, []string{"-p", "review this", "--output-format", "json", "--force", "-m", "gpt-5"}, cmd.Args)
	_, err = c.OneShot("--help", "")
	require.ErrorIs(t, err, ErrUnsafeArgument)
	_, err = c.OneShot("  ", "")
	require.ErrorIs(t, err, ErrEmptyDelivery)
}
