package harness

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestShippedDescriptors(t *testing.T) {
	require.Equal(t, []string{"claude", "cursor", "codex", "gemini"}, Names()[:4])
	require.Equal(t, Claude, Default())
	for _, d := range []*Descriptor{Claude, Cursor, Codex, Gemini} {
		require.Same(t, d, ByName(d.Name))
		require.NoError(t, d.check())
		require.NotEmpty(t, d.Egress, d.Name)
	}
	require.Nil(t, ByName("Claude"))
	require.False(t, Known(""))
}

func TestBlockAnswers(t *testing.T) {
	for d, want := range map[*Descriptor]string{
		Claude: `{"decision":"block","reason":"r"}`,
		Cursor: `{"followup_message":"r"}`,
		Codex:  `{"decision":"block","reason":"r"}`,
		Gemini: `{"decision":"deny","reason":"r"}`,
	} {
		b, err := json.Marshal(d.Gate.Block("r"))
		require.NoError(t, err)
		require.JSONEq(t, want, string(b), d.Name)
	}
}

func TestRegisterRefusesBadDescriptors(t *testing.T) {
	ok := func() *Descriptor {
		c := *Cursor
		c.Name, c.Order = "probe", 99
		return &c
	}
	for name, mutate := range map[string]func(*Descriptor){
		"duplicate":         func(d *Descriptor) { d.Name = Claude.Name },
		"bad name":          func(d *Descriptor) { d.Name = "Probe!" },
		"no binary":         func(d *Descriptor) { d.Binary = "" },
		"second default":    func(d *Descriptor) { d.Default = true },
		"no resume, no why": func(d *Descriptor) { d.ResumeRefusal = "" },
		"no block":          func(d *Descriptor) { d.Gate.Block = nil },
		"no hook file":      func(d *Descriptor) { d.Install.HookFile = "" },
		"packaged, no kind": func(d *Descriptor) { d.Install.Style = InstallPackaged },
	} {
		t.Run(name, func(t *testing.T) {
			d := ok()
			mutate(d)
			require.Panics(t, func() { Register(d) })
			require.Nil(t, ByName("probe"))
		})
	}
}

func TestList(t *testing.T) {
	require.Equal(t, "", List(nil))
	require.Equal(t, "a", List([]string{"a"}))
	require.Equal(t, "a or b", List([]string{"a", "b"}))
	require.Equal(t, "a, b or c", List([]string{"a", "b", "c"}))
}
