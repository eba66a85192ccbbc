// Package plugin holds the agent's side of theloop: the Claude Code plugin
// (`the-loop`, so its commands are `/the-loop:<command>`) and the Cursor
// rule, kept in this directory as plain files and embedded in every binary
// that installs them or enables them for a session. The Codex plugin and
// the Gemini CLI extension are rendered from the same files (agents.go).
//
// The plugin tells the agent how to work; it decides nothing. The graph
// decides (graph.Runtime), the daemon steers (loopd), and the Stop hook
// (loop-gate) enforces. The files under the-loop/ are the plugin exactly as
// Claude Code loads it, except for two things an installation renders:
// plugin.json's version gains a content hash (Claude Code caches a plugin
// by version, so any change must change it), and the Stop hook runs the
// loop-gate program the installer names.
//
// The daemon's built-in spawn and event prompt templates are files of this
// plugin too (SpawnPromptTemplate, EventPromptTemplate), so there is one
// copy of each.
//
// The package does no I/O beyond the marketplace directory it is asked to
// write (Sync), and reads nothing an agent can write.
package plugin

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/theloop-dev/theloop/harness"
)

// Names Claude Code sees.
const (
	// Name is the plugin's name; commands are /the-loop:<command>.
	Name = "the-loop"
	// MarketplaceName is the local marketplace theloop installs the plugin
	// from. It differs from the Python the-loop's ("the-loop") so the two
	// never shadow each other in Claude Code's marketplace list.
	MarketplaceName = "theloop"
	// ID is the key under enabledPlugins.
	ID = Name + "@" + MarketplaceName
	// GateProgram is the Stop hook's program when the installer names none.
	GateProgram = "loop-gate"
)

// Paths of files inside the plugin tree (slash-separated).
const (
	ManifestPath        = ".claude-plugin/plugin.json"
	HooksPath           = "hooks/hooks.json"
	SkillPath           = "skills/the-loop/SKILL.md"
	SpawnPromptPath     = "skills/the-loop/templates/webhook-autoexecute-prompt.md"
	EventPromptPath     = "skills/the-loop/templates/webhook-event-prompt.md"
	commandsDir         = "commands"
	marketplaceManifest = ".claude-plugin/marketplace.json"
	// managedMarker marks a directory Sync owns; Sync refuses to touch a
	// non-empty directory without it.
	managedMarker = ".theloop-managed"
)

//go:embed all:the-loop
var embedded embed.FS

//go:embed cursor/the-loop.mdc
var cursorRule []byte

// Files is the plugin tree as kept in the repository (unrendered).
func Files() fs.FS {
	sub, err := fs.Sub(embedded, Name)
	if err != nil {
		panic(err) // the directory is embedded at build time
	}
	return sub
}

func mustRead(name string) []byte {
	b, err := fs.ReadFile(Files(), name)
	if err != nil {
		panic(fmt.Sprintf("plugin: %s is not embedded: %v", name, err))
	}
	return b
}

// CursorRule is the Cursor rule file (.cursor/rules/the-loop.mdc).
func CursorRule() []byte { return slices.Clone(cursorRule) }

// SpawnPromptTemplate is the daemon's built-in prompt for a new session
// ($work_item, $event, $action, $repository, $delivery_id,
// $payload_excerpt, $interaction_directive, $graph_context).
func SpawnPromptTemplate() []byte { return mustRead(SpawnPromptPath) }

// EventPromptTemplate is the daemon's built-in prompt for an event
// delivered to a running or resumed session (same placeholders).
func EventPromptTemplate() []byte { return mustRead(EventPromptPath) }

// manifest is the part of plugin.json the package reads.
type manifest struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

func readManifest() manifest {
	var m manifest
	if err := json.Unmarshal(mustRead(ManifestPath), &m); err != nil {
		panic(fmt.Sprintf("plugin: %s: %v", ManifestPath, err))
	}
	return m
}

// Version is the plugin's version as kept in plugin.json (an installation
// appends "+<content hash>").
func Version() string { return readManifest().Version }

// OwnCommands are the commands no graph node names: work-on (the whole
// procedure), work-status (a read-only report), and the person's own —
// init (onboarding), create-ticket and upgrade-the-loop.
var OwnCommands = []string{"work-on", "work-status", "init", "create-ticket", "upgrade-the-loop"}

// Commands lists the slash commands the plugin ships (file names under
// commands/ without ".md"), sorted.
func Commands() []string {
	entries, err := fs.ReadDir(Files(), commandsDir)
	if err != nil {
		panic(err)
	}
	var out []string
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), ".md"); ok && !e.IsDir() {
			out = append(out, name)
		}
	}
	return out
}

// Options shape a rendered installation.
type Options struct {
	// GateProgram is the loop-gate program the Stop hook runs: a name on
	// the harness's PATH or an absolute path ("" = GateProgram).
	GateProgram string
}

// Tree is a rendered directory: slash-separated relative path → content.
type Tree map[string][]byte

// Paths lists the tree's paths, sorted.
func (t Tree) Paths() []string {
	out := make([]string, 0, len(t))
	for p := range t {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// Marketplace renders the local marketplace theloop installs: its manifest
// (.claude-plugin/marketplace.json) and the plugin under the-loop/, with
// the version stamped and the Stop hook running opts.GateProgram.
func Marketplace(opts Options) (Tree, error) {
	plug, version, err := renderPlugin(opts)
	if err != nil {
		return nil, err
	}
	tree := Tree{}
	for p, b := range plug {
		tree[Name+"/"+p] = b
	}
	mkt := marketplaceFile{
		Name:  MarketplaceName,
		Owner: person{Name: "theloop", URL: "https://github.com/theloop-dev/theloop"},
		Metadata: marketplaceMeta{
			Description: "theloop's own plugin, installed from the loopctl binary by `loopctl install`",
			Version:     version,
		},
		Plugins: []marketplaceEntry{{
			Name:        Name,
			Source:      "./" + Name,
			Description: "Work an item through theloop's process graph: the skill, the /the-loop commands and the Stop gate",
			Version:     version,
			Category:    "workflow",
		}},
	}
	b, err := json.MarshalIndent(mkt, "", "  ")
	if err != nil {
		return nil, err
	}
	tree[marketplaceManifest] = append(b, '\n')
	tree[managedMarker] = []byte("This directory is written by theloop (loopctl install, loopd); edits are replaced.\n")
	return tree, nil
}

// marketplaceFile is .claude-plugin/marketplace.json as Claude Code
// documents it (the fields theloop writes).
type marketplaceFile struct {
	Name     string             `json:"name"`
	Owner    person             `json:"owner"`
	Metadata marketplaceMeta    `json:"metadata"`
	Plugins  []marketplaceEntry `json:"plugins"`
}

type person struct {
	Name string `json:"name"`
	URL  string `json:"url,omitempty"`
}

type marketplaceMeta struct {
	Description string `json:"description"`
	Version     string `json:"version"`
}

type marketplaceEntry struct {
	Name        string `json:"name"`
	Source      string `json:"source"`
	Description string `json:"description"`
	Version     string `json:"version"`
	Category    string `json:"category"`
}

// renderPlugin is the plugin tree with the hook program and the stamped
// version.
func renderPlugin(opts Options) (Tree, string, error) {
	program := opts.GateProgram
	if program == "" {
		program = GateProgram
	}
	if strings.ContainsAny(program, "\x00\r\n") {
		return nil, "", fmt.Errorf("the loop-gate program %q must be one line", program)
	}
	tree := Tree{}
	err := fs.WalkDir(Files(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(Files(), p)
		tree[p] = b
		return err
	})
	if err != nil {
		return nil, "", err
	}
	hooks, err := renderHooks(tree[HooksPath], GateCommand(program, harness.Claude.Name))
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", HooksPath, err)
	}
	tree[HooksPath] = hooks

	// The version covers every file but the manifest itself.
	h := sha256.New()
	for _, p := range tree.Paths() {
		if p == ManifestPath {
			continue
		}
		fmt.Fprintf(h, "%s\x00%d\x00", p, len(tree[p]))
		h.Write(tree[p])
	}
	version := readManifest().Version + "+" + hex.EncodeToString(h.Sum(nil))[:10]
	var man map[string]any
	if err := json.Unmarshal(tree[ManifestPath], &man); err != nil {
		return nil, "", fmt.Errorf("%s: %w", ManifestPath, err)
	}
	man["version"] = version
	b, err := marshalOrdered(tree[ManifestPath], man)
	if err != nil {
		return nil, "", err
	}
	tree[ManifestPath] = b
	return tree, version, nil
}

// marshalOrdered re-encodes a JSON object keeping the original key order
// (encoding/json would sort the keys of a map).
func marshalOrdered(original []byte, values map[string]any) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(original))
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, err
		}
	}
	var b bytes.Buffer
	b.WriteString("{\n")
	for i, k := range keys {
		kb, _ := json.Marshal(k)
		vb, err := json.MarshalIndent(values[k], "  ", "  ")
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, "  %s: %s", kb, vb)
		if i < len(keys)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("}\n")
	return b.Bytes(), nil
}

// hooksFile is the shape of hooks/hooks.json Claude Code documents.
type hooksFile struct {
	Description string                   `json:"description,omitempty"`
	Hooks       map[string][]hookMatcher `json:"hooks"`
}

type hookMatcher struct {
	Matcher string        `json:"matcher,omitempty"`
	Hooks   []hookCommand `json:"hooks"`
}

type hookCommand struct {
	Type    string `json:"type"`
	Command string `json:"command"`
	Timeout int    `json:"timeout,omitempty"`
}

// renderHooks points every loop-gate command of the Stop hook at command.
func renderHooks(src []byte, command string) ([]byte, error) {
	var f hooksFile
	dec := json.NewDecoder(bytes.NewReader(src))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, err
	}
	found := false
	for i, m := range f.Hooks["Stop"] {
		for j, h := range m.Hooks {
			if IsGateCommand(h.Command) {
				f.Hooks["Stop"][i].Hooks[j].Command = command
				found = true
			}
		}
	}
	if !found {
		return nil, fmt.Errorf("no Stop hook runs %s", GateProgram)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(f); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// StopCommand is the command line the rendered plugin's Stop hook runs.
func (t Tree) StopCommand() string {
	b, ok := t[HooksPath]
	if !ok {
		b = t[Name+"/"+HooksPath]
	}
	return stopCommand(b)
}

func stopCommand(hooksJSON []byte) string {
	var f hooksFile
	if json.Unmarshal(hooksJSON, &f) != nil {
		return ""
	}
	for _, m := range f.Hooks["Stop"] {
		for _, h := range m.Hooks {
			if IsGateCommand(h.Command) {
				return h.Command
			}
		}
	}
	return ""
}

// GateCommand is the shell command line a harness runs: the program,
// quoted for the shell when it needs to be, the harness argument, and
// CrashGuard.
func GateCommand(program, harness string) string {
	return shellQuote(program) + " " + harness + CrashGuard
}

// CrashGuard ends every gate command line a harness runs. loop-gate itself
// answers only with exit 0 (its block is JSON on stdout) or 1 (bad usage),
// but when the Go runtime dies before main — an address-space limit on the
// hook, 64–700 MB, fails its first reservation — the process exits 2, which
// Claude Code, the Codex CLI and the Gemini CLI all read as a block with
// the runtime's stack trace as the reason (Codex and Gemini then loop). So
// any other status becomes exit 1, which all four read as a non-blocking
// error, with a line on stderr saying so; the block, an exit 0, never
// reaches it. A POSIX shell runs it: every harness runs a hook's command
// line through sh (bash).
const CrashGuard = ` || { s=$?; [ $s = 1 ] || echo "loop-gate died (status $s); the agent may stop" >&2; exit 1; }`

// WithCrashGuard is cmd (a gate invocation, with or without the guard)
// ending in CrashGuard.
func WithCrashGuard(cmd string) string { return GateInvocation(cmd) + CrashGuard }

// GateInvocation is a gate command line without its CrashGuard: the
// program and its arguments, as an earlier install or the user wrote them.
func GateInvocation(cmd string) string {
	return strings.TrimRight(strings.TrimSuffix(strings.TrimRight(cmd, " \t"), CrashGuard), " \t")
}

func shellQuote(s string) string {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_./+:,@%=~-", r)) {
			return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
		}
	}
	return s
}

// CommandProgram is a command line's first word as the shell reads it:
// quotes removed, backslash escapes applied ("'/opt/my bin/loop-gate'
// claude" → "/opt/my bin/loop-gate"). A Windows path without quotes keeps
// its backslashes.
func CommandProgram(cmd string) string {
	cmd = strings.TrimLeft(cmd, " \t")
	var b strings.Builder
	for i := 0; i < len(cmd); i++ {
		switch c := cmd[i]; c {
		case ' ', '\t':
			return b.String()
		case '\'':
			end := strings.IndexByte(cmd[i+1:], '\'')
			if end < 0 {
				b.WriteString(cmd[i+1:])
				return b.String()
			}
			b.WriteString(cmd[i+1 : i+1+end])
			i += end + 1
		case '"':
			for i++; i < len(cmd) && cmd[i] != '"'; i++ {
				if cmd[i] == '\\' && i+1 < len(cmd) && strings.IndexByte(`"\$`+"`", cmd[i+1]) >= 0 {
					i++
				}
				b.WriteByte(cmd[i])
			}
		case '\\':
			// An escape only where the shell's matters; a Windows path's
			// backslashes stay.
			if i+1 < len(cmd) && strings.IndexByte(`'" \$`, cmd[i+1]) >= 0 {
				i++
				b.WriteByte(cmd[i])
				continue
			}
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// IsGateCommand reports whether a hook command line runs loop-gate,
// whatever its path or arguments.
func IsGateCommand(cmd string) bool {
	prog := CommandProgram(cmd)
	base := prog[strings.LastIndexAny(prog, `/\`)+1:]
	return base == GateProgram || base == GateProgram+".exe"
}

// MarketplaceDir is where theloop keeps its local marketplace:
// $XDG_DATA_HOME/theloop/claude-marketplace, else
// <home>/.local/share/theloop/claude-marketplace.
func MarketplaceDir(getenv func(string) string, home string) string {
	base := getenv("XDG_DATA_HOME")
	if base == "" || !filepath.IsAbs(base) {
		base = filepath.Join(home, ".local", "share")
	}
	return filepath.Join(base, "theloop", "claude-marketplace")
}

// InstalledGateProgram is the loop-gate program the plugin installed in
// the marketplace directory runs ("" when none is installed).
func InstalledGateProgram(dir string) string {
	b, err := readBounded(filepath.Join(dir, Name, filepath.FromSlash(HooksPath)), 1<<20)
	if err != nil {
		return ""
	}
	return CommandProgram(stopCommand(b))
}
