package plugin

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// The Codex CLI and the Gemini CLI get the same prose as Claude Code — the
// skill and the /the-loop: commands under the-loop/ — in the packaging
// each CLI loads: a Codex plugin in a local marketplace, a Gemini CLI
// extension. Both are rendered from the one copy here, so the three never
// drift apart. Neither carries the Stop gate: the installer writes it into
// the CLI's own hook file (Codex's hooks.json, Gemini's settings.json).

// Paths inside the rendered trees (slash-separated).
const (
	// CodexMarketplaceManifest is the marketplace catalog Codex reads from
	// a local marketplace root.
	CodexMarketplaceManifest = ".agents/plugins/marketplace.json"
	// CodexPluginDir is the plugin inside that root.
	CodexPluginDir = "plugins/" + Name
	// CodexManifestPath is the plugin's manifest, inside CodexPluginDir.
	CodexManifestPath = ".codex-plugin/plugin.json"
	// GeminiManifestPath is the extension's manifest.
	GeminiManifestPath = "gemini-extension.json"
)

// CodexMarketplaceDir is where theloop keeps its Codex marketplace:
// <data home>/theloop/codex-marketplace (see MarketplaceDir).
func CodexMarketplaceDir(getenv func(string) string, home string) string {
	return filepath.Join(filepath.Dir(MarketplaceDir(getenv, home)), "codex-marketplace")
}

// GeminiExtensionDir is the extension's directory under the Gemini CLI's
// user extensions (~/.gemini/extensions/the-loop), where the CLI loads it.
func GeminiExtensionDir(home string) string {
	return filepath.Join(home, ".gemini", "extensions", Name)
}

// commandFile is one /the-loop: command: its name, the front matter's
// description and the body (the prompt, $ARGUMENTS standing for the
// user's argument).
type commandFile struct {
	name, description, body string
}

func readCommands() ([]commandFile, error) {
	var out []commandFile
	for _, name := range Commands() {
		b := mustRead(commandsDir + "/" + name + ".md")
		desc, body, err := splitFrontMatter(string(b))
		if err != nil {
			return nil, fmt.Errorf("%s/%s.md: %w", commandsDir, name, err)
		}
		out = append(out, commandFile{name: name, description: desc, body: body})
	}
	return out, nil
}

// splitFrontMatter returns a command's description and its body.
func splitFrontMatter(s string) (desc, body string, err error) {
	rest, ok := strings.CutPrefix(s, "---\n")
	if !ok {
		return "", s, nil
	}
	fm, body, ok := strings.Cut(rest, "\n---\n")
	if !ok {
		return "", "", fmt.Errorf("front matter is not closed by ---")
	}
	for _, line := range strings.Split(fm, "\n") {
		if v, ok := strings.CutPrefix(line, "description:"); ok {
			desc = strings.TrimSpace(v)
			if uq, err := strconv.Unquote(desc); err == nil {
				desc = uq
			}
		}
	}
	if desc == "" {
		return "", "", fmt.Errorf("front matter has no description")
	}
	return desc, strings.TrimLeft(body, "\n"), nil
}

// skillFiles is the skill directory (skills/the-loop/...) as kept here.
func skillFiles() (Tree, error) {
	tree := Tree{}
	err := fs.WalkDir(Files(), "skills", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(Files(), p)
		tree[p] = b
		return err
	})
	return tree, err
}

// contentVersion is the plugin's version with a hash of tree's files, so a
// CLI that caches by version sees every change.
func contentVersion(tree Tree) string {
	h := sha256.New()
	for _, p := range tree.Paths() {
		fmt.Fprintf(h, "%s\x00%d\x00", p, len(tree[p]))
		h.Write(tree[p])
	}
	return Version() + "+" + hex.EncodeToString(h.Sum(nil))[:10]
}

func indentJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	err := enc.Encode(v)
	return b.Bytes(), err
}

// CodexMarketplace renders theloop's local Codex marketplace: the catalog
// and the plugin "the-loop" with the skill, and each /the-loop: command as
// a skill of its own (Codex plugins carry skills, not slash commands; the
// skill named like the command does what the command does).
func CodexMarketplace() (Tree, error) {
	cmds, err := readCommands()
	if err != nil {
		return nil, err
	}
	plug, err := skillFiles()
	if err != nil {
		return nil, err
	}
	for _, c := range cmds {
		plug["skills/"+c.name+"/SKILL.md"] = []byte("---\nname: " + c.name + "\ndescription: " + strconv.Quote(c.description) +
			"\n---\n\n" + "(The theloop command /the-loop:" + c.name + " as a skill: `$ARGUMENTS` below stands for the work item or text the user gave with it.)\n\n" + c.body)
	}
	version := contentVersion(plug)
	man, err := indentJSON(map[string]any{
		"name":        Name,
		"version":     version,
		"description": "Work an item through theloop's process graph: the skill and one skill per /the-loop command",
		"skills":      "./skills/",
	})
	if err != nil {
		return nil, err
	}
	plug[CodexManifestPath] = man
	tree := Tree{}
	for p, b := range plug {
		tree[CodexPluginDir+"/"+p] = b
	}
	cat, err := indentJSON(map[string]any{
		"name":      MarketplaceName,
		"interface": map[string]any{"displayName": "theloop"},
		"plugins": []any{map[string]any{
			"name":     Name,
			"source":   map[string]any{"source": "local", "path": "./" + CodexPluginDir},
			"policy":   map[string]any{"installation": "AVAILABLE", "authentication": "ON_INSTALL"},
			"category": "Productivity",
		}},
	})
	if err != nil {
		return nil, err
	}
	tree[CodexMarketplaceManifest] = cat
	tree[managedMarker] = []byte("This directory is written by theloop (loopctl install); edits are replaced.\n")
	return tree, nil
}

// GeminiExtension renders the Gemini CLI extension "the-loop": its
// manifest, the skill, and the commands as TOML under commands/the-loop/
// (so they are /the-loop:<command>, as in Claude Code), {{args}} standing
// where Claude Code's $ARGUMENTS does.
func GeminiExtension() (Tree, error) {
	cmds, err := readCommands()
	if err != nil {
		return nil, err
	}
	tree, err := skillFiles()
	if err != nil {
		return nil, err
	}
	for _, c := range cmds {
		prompt := strings.ReplaceAll(c.body, "$ARGUMENTS", "{{args}}")
		tree[path.Join("commands", Name, c.name+".toml")] = []byte("description = " + tomlString(c.description) + "\nprompt = " + tomlMultiline(prompt) + "\n")
	}
	version := contentVersion(tree)
	man, err := indentJSON(map[string]any{"name": Name, "version": version})
	if err != nil {
		return nil, err
	}
	tree[GeminiManifestPath] = man
	tree[managedMarker] = []byte("This directory is written by theloop (loopctl install); edits are replaced.\n")
	return tree, nil
}

// tomlString is a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, "\\u%04X", r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// tomlMultiline is a TOML multi-line basic string ("""…"""): backslashes
// and quotes escaped, so no run of three quotes can close it early.
func tomlMultiline(s string) string {
	var b strings.Builder
	b.WriteString("\"\"\"\n")
	for _, r := range s {
		switch {
		case r == '\\' || r == '"':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, "\\u%04X", r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteString("\"\"\"")
	return b.String()
}
