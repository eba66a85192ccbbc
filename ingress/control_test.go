package ingress

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseControl(t *testing.T) {
	amb := &ControlCommand{Ambiguous: true}
	cmd := func(c Command) *ControlCommand { return &ControlCommand{Command: c} }
	tests := []struct {
		name string
		body string
		want *ControlCommand
	}{
		{"plain", "the-loop start", cmd(CmdStart)},
		{"every command", "the-loop stop", cmd(CmdStop)},
		{"pause", "the-loop pause", cmd(CmdPause)},
		{"resume", "the-loop resume", cmd(CmdResume)},
		{"execute", "the-loop execute", cmd(CmdExecute)},
		{"contribute with a goal", "the-loop contribute: add a dark mode", cmd(CmdContribute)},
		{"cleanup", "the-loop cleanup", cmd(CmdCleanup)},
		{"do with a task", "the-loop do fix the flaky test", cmd(CmdDo)},
		{"case-insensitive", "The-Loop START", cmd(CmdStart)},
		{"slash command", "/the-loop start", cmd(CmdStart)},
		{"indented up to three spaces", "   the-loop start", cmd(CmdStart)},
		{"trailing punctuation", "the-loop start.", cmd(CmdStart)},
		{"trailing exclamation", "the-loop start!", cmd(CmdStart)},
		{"CRLF", "hello\r\nthe-loop start\r\n", cmd(CmdStart)},
		{"on a later line", "Looks good to me.\n\nthe-loop execute\n\nthanks", cmd(CmdExecute)},
		{"the same command twice", "the-loop start\nthe-loop start", cmd(CmdStart)},
		{"two commands are ambiguous", "the-loop start\nthe-loop stop", amb},
		{"execute and stop are ambiguous", "/the-loop execute\n/the-loop stop", amb},

		{"mid-sentence is talk, not a command", "please the-loop start now", nil},
		{"negated before", "don't the-loop start", nil},
		{"negated after: not", "the-loop start not yet, wait for design", nil},
		{"negated after: no", "the-loop stop no", nil},
		{"negated after: later", "the-loop start later", nil},
		{"cancel", "/the-loop start cancel", nil},
		{"a question", "the-loop start?", nil},
		{"a question later on the line", "the-loop stop, or should we wait?", nil},
		{"glued suffix", "the-loop startlater", nil},
		{"does is not do", "the-loop does nothing", nil},
		{"hyphen suffix", "the-loop start-up", nil},
		{"colon suffix", "the-loop stop:now", nil},
		{"prefixed word", "xthe-loop start", nil},
		{"quoted reply", "> the-loop start\nI disagree", nil},
		{"quoted with slash", "> /the-loop stop", nil},
		{"inline code", "`the-loop start`", nil},
		{"fenced code block", "```\nthe-loop start\n```", nil},
		{"fenced with language", "```sh\nthe-loop stop\n```\n", nil},
		{"tilde fence", "~~~\nthe-loop stop\n~~~", nil},
		{"after a closed fence counts", "```\ncode\n```\nthe-loop start", cmd(CmdStart)},
		{"unclosed fence hides the rest", "```\nthe-loop start", nil},
		{"indented code block", "    the-loop start", nil},
		{"tab-indented code block", "\tthe-loop start", nil},
		{"empty", "", nil},
		{"just the prefix", "the-loop", nil},
		{"force is never a keyword", "the-loop force", nil},
		{"review is not a keyword", "the-loop review", nil},
		{"ambiguity ignores quoted", "> the-loop stop\nthe-loop start", cmd(CmdStart)},
	}
	kt, err := newKeywordTable(DefaultControlConfig())
	require.NoError(t, err)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, kt.parse(tc.body))
		})
	}
}

func TestParseControlVocabulary(t *testing.T) {
	cfg := DefaultControlConfig()
	cfg.Keywords[CmdStart] = "  Loop   Go "
	cfg.Keywords[CmdStop] = ""
	kt, err := newKeywordTable(cfg)
	require.NoError(t, err)
	require.Equal(t, &ControlCommand{Command: CmdStart}, kt.parse("loop go"))
	require.Nil(t, kt.parse("the-loop start"), "the default keyword is replaced")
	require.Nil(t, kt.parse("the-loop stop"), "an empty keyword disables the command")
	require.Equal(t, &ControlCommand{Command: CmdPause}, kt.parse("the-loop pause"))

	off, err := newKeywordTable(ControlConfig{Disabled: true, Keywords: DefaultControlConfig().Keywords})
	require.NoError(t, err)
	require.Nil(t, off.parse("the-loop start"))

	for _, bad := range []string{"/slash", "the-loop `x`", "> quoted", string(make([]byte, 80))} {
		c := DefaultControlConfig()
		c.Keywords[CmdDo] = bad + "x"
		_, err := newKeywordTable(c)
		require.Error(t, err, bad)
	}
}

func TestCommandClasses(t *testing.T) {
	for _, c := range Commands() {
		require.True(t, c.Valid())
	}
	require.False(t, Command("force").Valid())
	require.False(t, Command("review").Valid())
	require.True(t, CmdStart.Spawns() && CmdContribute.Spawns() && CmdDo.Spawns())
	require.False(t, CmdResume.Spawns())
	require.True(t, CmdResume.Arms())
	require.False(t, CmdStop.Arms() || CmdPause.Arms() || CmdCleanup.Arms() || CmdExecute.Arms())
	require.True(t, CmdExecute.ForGraph())
	require.True(t, CmdCleanup.TearsDown())
}
