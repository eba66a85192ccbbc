package plugin

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCodexMarketplaceCarriesTheProse(t *testing.T) {
	tree, err := CodexMarketplace()
	require.NoError(t, err)
	var cat struct {
		Name    string `json:"name"`
		Plugins []struct {
			Name   string `json:"name"`
			Source struct {
				Source, Path string
			} `json:"source"`
		} `json:"plugins"`
	}
	require.NoError(t, json.Unmarshal(tree[CodexMarketplaceManifest], &cat))
	require.Equal(t, MarketplaceName, cat.Name)
	require.Equal(t, "./"+CodexPluginDir, cat.Plugins[0].Source.Path)
	var man struct{ Name, Version, Skills string }
	require.NoError(t, json.Unmarshal(tree[CodexPluginDir+"/"+CodexManifestPath], &man))
	require.Equal(t, Name, man.Name)
	require.True(t, strings.HasPrefix(man.Version, Version()+"+"), man.Version)
	require.Equal(t, mustRead(SkillPath), tree[CodexPluginDir+"/"+SkillPath], "the one skill, unchanged")
	for _, c := range Commands() {
		skill := string(tree[CodexPluginDir+"/skills/"+c+"/SKILL.md"])
		require.True(t, strings.HasPrefix(skill, "---\nname: "+c+"\ndescription: \""), skill[:min(80, len(skill))])
		body := string(mustRead(commandsDir + "/" + c + ".md"))
		_, want, _ := strings.Cut(strings.TrimPrefix(body, "---\n"), "\n---\n")
		require.True(t, strings.HasSuffix(skill, strings.TrimLeft(want, "\n")), "%s: the command's prose, whole", c)
	}
}

func TestGeminiExtensionCarriesTheProse(t *testing.T) {
	tree, err := GeminiExtension()
	require.NoError(t, err)
	var man struct{ Name, Version string }
	require.NoError(t, json.Unmarshal(tree[GeminiManifestPath], &man))
	require.Equal(t, Name, man.Name)
	require.Equal(t, mustRead(SkillPath), tree[SkillPath])
	for _, c := range Commands() {
		toml := string(tree["commands/"+Name+"/"+c+".toml"])
		require.True(t, strings.HasPrefix(toml, "description = \""), toml[:min(80, len(toml))])
		require.Contains(t, toml, "\nprompt = \"\"\"\n")
		require.NotContains(t, toml, "$ARGUMENTS")
		require.True(t, strings.HasSuffix(toml, "\"\"\"\n"))
	}
	require.Contains(t, string(tree["commands/"+Name+"/work-on.toml"]), "{{args}}")
}

// FuzzTOMLStrings: whatever the prose holds, the multi-line string is
// closed only by its own closing quotes and holds no raw control
// character, and the basic string has no raw quote or newline.
func FuzzTOMLStrings(f *testing.F) {
	for _, s := range []string{"", `"""`, `a\b`, "x\ny", "\x00\x1f\x7f", `""""""`, "é ✓"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m := tomlMultiline(s)
		inner := strings.TrimSuffix(strings.TrimPrefix(m, "\"\"\"\n"), "\"\"\"")
		for i := 0; i < len(inner); i++ {
			switch c := inner[i]; {
			case c == '\\':
				i++ // an escape: the next byte is data
			case c == '"':
				t.Fatalf("unescaped quote in %q", m)
			case c < 0x20 && c != '\n' && c != '\t', c == 0x7f:
				t.Fatalf("raw control byte in %q", m)
			}
		}
		b := tomlString(s)
		if strings.ContainsAny(b[1:len(b)-1], "\n\r") {
			t.Fatalf("newline in a basic string %q", b)
		}
	})
}
