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

func TestCursorIsInteractiveWithoutResume(t *testing.T) {
	c := &Cursor{Args: []string{"--force"}}
	args, err := c.Interactive("abc")
	require.NoError(t, err)
	require.Equal(t, []string{"--force"}, args, "no prompt on the command line: it is pasted")
	_, err = c.Resume("abc")
	require.ErrorIs(t, err, ErrResumeUnsupported)

	cmd, err := c.OneShot("review this", "gpt-5")
	require.NoError(t, err)
	require.Equal(t, "cursor-agent", cmd.Name)
	require.Equal(t, []string{"-p", "review this", "--output-format", "json", "--force", "-m", "gpt-5"}, cmd.Args)
	_, err = c.OneShot("--help", "")
	require.ErrorIs(t, err, ErrUnsafeArgument)
	_, err = c.OneShot("  ", "")
	require.ErrorIs(t, err, ErrEmptyDelivery)
}

func TestCodexAndGeminiArgv(t *testing.T) {
	const id = "0b6f8f57-2d3c-4a54-9d8e-5f1f3e0c9a11"
	for _, tc := range []struct {
		h                   Harness
		bin                 string
		interactive, resume []string
		oneShot             []string
	}{
		{&Codex{Args: []string{"--sandbox", "workspace-write"}}, "codex",
			[]string{"--enable", "hooks", "--dangerously-bypass-hook-trust", "--sandbox", "workspace-write"},
			[]string{"resume", "--last", "--enable", "hooks", "--dangerously-bypass-hook-trust", "--sandbox", "workspace-write"},
			[]string{"exec", "--json", "--sandbox", "workspace-write", "-m", "m1", "-"}},
		{&Gemini{Args: []string{"--yolo"}}, "gemini",
			[]string{"--session-id", id, "--skip-trust", "--yolo"},
			[]string{"--resume", id, "--skip-trust", "--yolo"},
			[]string{"-o", "json", "--yolo", "-m", "m1"}},
	} {
		t.Run(tc.h.Name(), func(t *testing.T) {
			require.Equal(t, tc.bin, tc.h.Binary())
			args, err := tc.h.Interactive(id)
			require.NoError(t, err)
			require.Equal(t, tc.interactive, args)
			args, err = tc.h.Resume(id)
			require.NoError(t, err)
			require.Equal(t, tc.resume, args)
			cmd, err := tc.h.OneShot("review this", "m1")
			require.NoError(t, err)
			require.Equal(t, tc.oneShot, cmd.Args)
			require.Equal(t, "review this", string(cmd.Stdin), "the prompt travels on stdin")
			_, err = tc.h.Interactive("../x")
			require.ErrorIs(t, err, ErrInvalidName)
			_, err = tc.h.OneShot("x", "--evil")
			require.ErrorIs(t, err, ErrUnsafeArgument)
		})
	}
	_, err := (&Codex{Args: []string{"x;"}}).Interactive(id)
	require.ErrorIs(t, err, ErrUnsafeArgument)
	_, err = (&Gemini{Args: []string{"x;"}}).Resume(id)
	require.ErrorIs(t, err, ErrUnsafeArgument)
}
