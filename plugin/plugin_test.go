package plugin

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/goccy/go-yaml"
	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/hooks"
	"github.com/theloop-dev/theloop/loop"
)

// graphCommands is every node command any shipped graph names.
func graphCommands(t *testing.T) []string {
	t.Helper()
	set := map[string]bool{}
	for _, name := range loop.ShippedLoopNames() {
		g, err := loop.ShippedGraph(name)
		require.NoError(t, err, name)
		for _, n := range g.Nodes() {
			if n.Command != "" {
				set[n.Command] = true
			}
		}
	}
	var out []string
	for c := range set {
		out = append(out, c)
	}
	slices.Sort(out)
	return out
}

// TestCommandsMatchTheGraphs keeps the slash commands and the graphs in
// step: every /the-loop:<command> an assignment can name has a file, and
// the plugin ships no command a graph cannot send an agent to (besides
// work-on, the superset, work-status, the read-only report, and the
// person's own: upgrade-the-loop, init and create-ticket).
func TestCommandsMatchTheGraphs(t *testing.T) {
	want := append(graphCommands(t), OwnCommands...)
	slices.Sort(want)
	require.NotEmpty(t, want)
	require.Equal(t, want, Commands(), "commands/*.md must be exactly the graphs' node commands plus %v; add or remove files under plugin/the-loop/commands", OwnCommands)
}

// frontMatter splits a markdown file's YAML front matter from its body.
func frontMatter(t *testing.T, name string, b []byte) (map[string]any, string) {
	t.Helper()
	s := string(b)
	require.True(t, strings.HasPrefix(s, "---\n"), "%s must start with front matter", name)
	end := strings.Index(s[4:], "\n---\n")
	require.GreaterOrEqual(t, end, 0, "%s: front matter is not closed", name)
	var fm map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(s[4:4+end]), &fm), "%s: front matter", name)
	return fm, s[4+end+5:]
}

func TestCommandFilesHaveFrontMatter(t *testing.T) {
	for _, c := range Commands() {
		t.Run(c, func(t *testing.T) {
			name := "commands/" + c + ".md"
			fm, body := frontMatter(t, name, mustRead(name))
			for key := range fm {
				require.Contains(t, []string{"description", "argument-hint", "allowed-tools", "model", "disable-model-invocation"}, key, "%s: unknown front-matter key", name)
			}
			desc, _ := fm["description"].(string)
			require.NotEmpty(t, strings.TrimSpace(desc), "%s: description", name)
			require.NotEmpty(t, fm["argument-hint"], "%s: argument-hint", name)
			require.Contains(t, body, "$ARGUMENTS", "%s: the body must use the work item it was given", name)
			if !slices.Contains([]string{"work-on", "finish-tasks", "do-task", "upgrade-the-loop", "init", "create-ticket"}, c) {
				require.Contains(t, body, "loopctl check $ARGUMENTS", "%s: say how to check before claiming", name)
			}
			require.Contains(t, body, "loopctl", "%s", name)
		})
	}
}

func TestSkillFrontMatter(t *testing.T) {
	fm, body := frontMatter(t, SkillPath, mustRead(SkillPath))
	require.Equal(t, "the-loop", fm["name"])
	desc, _ := fm["description"].(string)
	require.NotEmpty(t, desc)
	require.LessOrEqual(t, len(desc), 1024, "Claude Code caps a skill description")
	// The operating model the issue names, each stated.
	for _, must := range []string{
		"loopctl graph complete <id>",
		"status: approved",
		"unapproved upstream",
		"## Review rounds",
		"## Phase selection and skips",
		"loopctl ask --work-item",
		"## Where iteration happens",
		"work-item mode",
		"cli mode",
	} {
		require.Contains(t, body, must)
	}
	// Every reference page the skill links exists.
	for _, page := range []string{"reference/workflow.md", "reference/collaboration.md", "reference/cli.md", "reference/writing.md"} {
		require.Contains(t, body, "("+page+")")
		_, err := fs.Stat(Files(), "skills/the-loop/"+page)
		require.NoError(t, err, page)
	}
}

// TestSkillNamesEveryClaimStatus: the skill explains every status the claim
// envelope can carry, in the runtime's own words.
func TestSkillNamesEveryClaimStatus(t *testing.T) {
	skill := string(mustRead(SkillPath))
	for _, st := range []string{string(graph.StatusPass), string(graph.StatusBlock), string(graph.StatusWait),
		string(graph.StepEscalated), string(graph.StepRefused), string(graph.StepNoop), "busy"} {
		require.Contains(t, skill, "`"+st+"`")
	}
}

// TestSkillNamesTheCommentMarker: the marker an agent must put on its own
// comments is the one the ingress recognises.
func TestSkillNamesTheCommentMarker(t *testing.T) {
	require.Contains(t, string(mustRead(SkillPath)), hooks.Marker)
}

// TestWorkflowPageNamesEveryNode: the workflow reference lists every node
// of every shipped graph, and every node command beside it.
func TestWorkflowPageNamesEveryNode(t *testing.T) {
	page := string(mustRead("skills/the-loop/reference/workflow.md"))
	for _, name := range loop.ShippedLoopNames() {
		start := strings.Index(page, "\n## "+name+"\n")
		require.GreaterOrEqual(t, start, 0, "workflow.md has no section for %s", name)
		section := page[start+1:]
		if end := strings.Index(section[3:], "\n## "); end >= 0 {
			section = section[:end+3]
		}
		g, err := loop.ShippedGraph(name)
		require.NoError(t, err)
		for _, n := range g.Nodes() {
			require.True(t, strings.Contains(section, "`"+n.ID+"`"), "workflow.md § %s does not describe node %s", name, n.ID)
			if n.Command != "" {
				require.True(t, strings.Contains(section, "`"+n.Command+"`"), "workflow.md § %s does not name the command %s", name, n.Command)
			}
		}
	}
}

func TestManifestAndHooksShape(t *testing.T) {
	var man map[string]any
	require.NoError(t, json.Unmarshal(mustRead(ManifestPath), &man))
	require.Equal(t, Name, man["name"])
	require.Regexp(t, `^\d+\.\d+\.\d+$`, man["version"], "plugin.json keeps a plain semver; installs append +<hash>")

	var hf hooksFile
	dec := json.NewDecoder(bytes.NewReader(mustRead(HooksPath)))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&hf))
	require.ElementsMatch(t, []string{"SessionStart", "Stop"}, mapKeys(hf.Hooks))
	require.Equal(t, "loop-gate claude", stopCommand(mustRead(HooksPath)))
	start := hf.Hooks["SessionStart"]
	require.Len(t, start, 1)
	require.Equal(t, "command", start[0].Hooks[0].Type)
	require.Contains(t, start[0].Hooks[0].Command, ".the-loop", "the reminder speaks only in repositories that run the-loop")
	require.NotContains(t, start[0].Hooks[0].Command, "\n", "one line")
}

func mapKeys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestCursorRule(t *testing.T) {
	fm, body := frontMatter(t, "cursor/the-loop.mdc", CursorRule())
	require.Equal(t, true, fm["alwaysApply"])
	require.NotEmpty(t, fm["description"])
	for _, must := range []string{"loopctl graph complete <id>", "status: approved", "loopctl ask --work-item", "unapproved upstream"} {
		require.Contains(t, body, must)
	}
}

func TestPromptTemplates(t *testing.T) {
	for name, tmpl := range map[string][]byte{SpawnPromptPath: SpawnPromptTemplate(), EventPromptPath: EventPromptTemplate()} {
		s := string(tmpl)
		for _, ph := range []string{"$work_item", "$event", "$action", "$repository", "$delivery_id", "$interaction_directive", "$graph_context", "$payload_excerpt"} {
			require.Contains(t, s, ph, name)
		}
		// The excerpt comes last, fenced, after the untrusted warning.
		warn := strings.LastIndex(s, "untrusted")
		require.Greater(t, warn, strings.Index(s, "$graph_context"), name)
		require.True(t, strings.HasSuffix(strings.TrimSpace(s), "```json\n$payload_excerpt\n```"), name)
	}
	require.Contains(t, string(SpawnPromptTemplate()), "/the-loop:work-on $work_item")
}

// TestEveryFileIsEmbedded: what is in the directory is what the binary
// carries (a file go:embed skipped would silently be missing from every
// install).
func TestEveryFileIsEmbedded(t *testing.T) {
	var onDisk []string
	require.NoError(t, filepath.WalkDir(Name, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(Name, p)
			onDisk = append(onDisk, filepath.ToSlash(rel))
		}
		return err
	}))
	var embedded []string
	require.NoError(t, fs.WalkDir(Files(), ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			embedded = append(embedded, p)
		}
		return err
	}))
	require.Equal(t, onDisk, embedded)
	require.Contains(t, embedded, ManifestPath)
	require.Contains(t, embedded, HooksPath)
	require.Contains(t, embedded, SkillPath)
}

// TestVersionChangesWithContent: the installed version carries a hash of
// the rendered files, so Claude Code (which caches a plugin by version)
// picks up every change, including a different gate program.
func TestVersionChangesWithContent(t *testing.T) {
	a, err := Marketplace(Options{})
	require.NoError(t, err)
	again, err := Marketplace(Options{})
	require.NoError(t, err)
	require.Equal(t, a, again, "rendering is deterministic")
	b, err := Marketplace(Options{GateProgram: "/opt/the loop/bin/loop-gate"})
	require.NoError(t, err)
	va, vb := installedVersion(t, a), installedVersion(t, b)
	require.True(t, strings.HasPrefix(va, Version()+"+"), va)
	require.NotEqual(t, va, vb)
	require.Equal(t, "'/opt/the loop/bin/loop-gate' claude"+CrashGuard, b.StopCommand())
	require.Equal(t, "loop-gate claude"+CrashGuard, a.StopCommand())
	require.Equal(t, "/opt/the loop/bin/loop-gate", CommandProgram(b.StopCommand()))

	var mkt marketplaceFile
	require.NoError(t, json.Unmarshal(b[marketplaceManifest], &mkt))
	require.Equal(t, MarketplaceName, mkt.Name)
	require.Equal(t, vb, mkt.Plugins[0].Version)
	require.Equal(t, "./"+Name, mkt.Plugins[0].Source)

	_, err = Marketplace(Options{GateProgram: "loop-gate\nrm -rf ~"})
	require.Error(t, err)
}

func installedVersion(t *testing.T, tree Tree) string {
	var m manifest
	require.NoError(t, json.Unmarshal(tree[Name+"/"+ManifestPath], &m))
	return m.Version
}

func TestGateCommandHelpers(t *testing.T) {
	for _, tc := range []struct {
		cmd  string
		gate bool
		prog string
	}{
		{"loop-gate claude", true, "loop-gate"},
		{"/usr/local/bin/loop-gate claude", true, "/usr/local/bin/loop-gate"},
		{"'/opt/my bin/loop-gate' claude", true, "/opt/my bin/loop-gate"},
		{`'/opt/it'\''s/loop-gate' claude`, true, "/opt/it's/loop-gate"},
		{`C:\bin\loop-gate.exe claude`, true, `C:\bin\loop-gate.exe`},
		{"python3 gate.py claude", false, "python3"},
		{"loop-gatex claude", false, "loop-gatex"},
		{"", false, ""},
	} {
		require.Equal(t, tc.gate, IsGateCommand(tc.cmd), tc.cmd)
		require.Equal(t, tc.prog, CommandProgram(tc.cmd), tc.cmd)
	}
	require.Equal(t, "'/opt/it'\\''s/loop-gate' claude"+CrashGuard, GateCommand("/opt/it's/loop-gate", "claude"))
	require.Equal(t, "loop-gate claude", GateInvocation(GateCommand("loop-gate", "claude")))
	require.Equal(t, "loop-gate claude", GateInvocation("loop-gate claude"), "an earlier install's line, without the guard")
}

func TestMarketplaceDir(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	require.Equal(t, filepath.Join("/home/a", ".local", "share", "theloop", "claude-marketplace"), MarketplaceDir(env(nil), "/home/a"))
	require.Equal(t, filepath.Join("/data", "theloop", "claude-marketplace"), MarketplaceDir(env(map[string]string{"XDG_DATA_HOME": "/data"}), "/home/a"))
	require.Equal(t, filepath.Join("/home/a", ".local", "share", "theloop", "claude-marketplace"), MarketplaceDir(env(map[string]string{"XDG_DATA_HOME": "rel"}), "/home/a"), "a relative XDG_DATA_HOME is ignored, as the spec says")
}

// --- no reference prose ---------------------------------------------------------

func proseWords(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// TestNoReferenceProse: the plugin is written in our own words. Facts
// (names, formats, headings) carry over from the Python the-loop; its
// sentences do not. testdata/reference-shingles.txt holds hashes of every
// eight-word run of the reference plugin's prose; no eight-word run of
// ours may match one.
func TestNoReferenceProse(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "reference-shingles.txt"))
	require.NoError(t, err)
	defer f.Close()
	ref := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" && !strings.HasPrefix(line, "#") {
			ref[line] = true
		}
	}
	require.Greater(t, len(ref), 1000, "the reference hashes are missing")

	files := map[string][]byte{"cursor/the-loop.mdc": CursorRule()}
	require.NoError(t, fs.WalkDir(Files(), ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files[p] = mustRead(p)
		}
		return err
	}))
	const n = 8
	for name, b := range files {
		w := proseWords(string(b))
		for i := 0; i+n <= len(w); i++ {
			run := strings.Join(w[i:i+n], " ")
			h := sha256.Sum256([]byte(run))
			require.False(t, ref[hex.EncodeToString(h[:])[:12]], "%s repeats the reference's prose: %q — say it in our own words", name, run)
		}
	}
}

// TestWorkOnRegistersAndLinks: a session a person started is told how to
// become the item's session in loopd, and every pull request how to reach
// it — with the verbs loopctl really has.
func TestWorkOnRegistersAndLinks(t *testing.T) {
	body := string(mustRead("commands/work-on.md"))
	for _, must := range []string{
		"THE_LOOP_SESSION_ID",
		"loopctl sessions register <ref> --harness-session-id",
		"--cwd",
		"loopctl sessions link-pr <ref> --pull-request",
		"Closes #42",
		"loopctl critic list",
		"loopctl critic run <critic> --work-item $ARGUMENTS",
	} {
		require.Contains(t, body, must)
	}
	cli := string(mustRead("skills/the-loop/reference/cli.md"))
	for _, must := range []string{"loopctl sessions register", "loopctl sessions link-pr", "loopctl critic run", "loopctl critic list", "loopctl config harness"} {
		require.Contains(t, cli, must)
	}
}

// TestCriticNodesNameCriticRun: at every critic node of every shipped
// graph, the assignment loopd pastes, the workflow page and the skill name
// loopctl critic run; no other node's assignment does.
func TestCriticNodesNameCriticRun(t *testing.T) {
	wi := graph.WorkItem{ID: "issue-7"}
	critics := 0
	for _, name := range loop.ShippedLoopNames() {
		g, err := loop.ShippedGraph(name)
		require.NoError(t, err)
		for _, n := range g.Nodes() {
			text := hooks.RenderAssignment(wi, n, "", 0, "")
			if hooks.IsCriticNode(n) {
				critics++
				require.Contains(t, text, "loopctl critic run <critic> --work-item issue-7 --node "+n.ID, "%s § %s", name, n.ID)
			} else {
				require.NotContains(t, text, "critic run", "%s § %s", name, n.ID)
			}
		}
	}
	require.GreaterOrEqual(t, critics, 4, "design-critic-review and three critic-review nodes")
	require.Contains(t, string(mustRead("skills/the-loop/reference/workflow.md")), "loopctl critic run <critic> --work-item <id>")
	require.Contains(t, string(mustRead(SkillPath)), "loopctl critic run <critic> --work-item <id>")
}

// TestSkillDescribesConfigurationAndDaemon: the skill carries the table of
// the repository keys theloop reads — each one a key the harness-config
// reader really reads — and what loopd does around the agent.
func TestSkillDescribesConfigurationAndDaemon(t *testing.T) {
	skill := string(mustRead(SkillPath))
	require.Contains(t, skill, "## Configuration you will meet")
	require.Contains(t, skill, "## What loopd does around you")
	for _, key := range loop.HarnessKeysRead() {
		require.Contains(t, skill, "`"+key+"`", "the skill's configuration table must name %s", key)
	}
	for _, must := range []string{"THE_LOOP_WORK_ITEM", "assignment", "sandbox", "authorized"} {
		require.Contains(t, skill, must)
	}
}
