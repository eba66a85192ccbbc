package loop

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/theloop-dev/theloop/hooks"
)

// The keys of the-loop's harness config (v11.2, as its own repository's
// .the-loop/harness-config.yaml sets them), each with what theloop does
// with it. A repository moved from the Python the-loop keeps its file; the
// keys theloop does not read are named, with what theloop does instead,
// by `loopctl config harness` — never dropped without a word
// (conventions rule 22).
//
// A key is matched by its longest catalogued prefix: "tokenEconomy"
// covers every key under it. Read keys are those a reader in this package
// consumes (ParseHarnessConfig, Critics, ScenarioGlobs, InstructionEntries,
// PhaseSelection).
type harnessKey struct {
	key string
	// read: theloop reads the key (instead is then what it is read as, or "").
	read    bool
	instead string
}

var harnessKeyCatalogue = []harnessKey{
	{key: "version", read: true, instead: "accepted; theloop reads every version of the file the same way"},
	{key: "ticketing.system", instead: "the ticket system follows from the work item's ref: GitHub, or Jira when ticketing.jira.project is set"},
	{key: "ticketing.github.owner", read: true},
	{key: "ticketing.github.repo", read: true},
	{key: "ticketing.github.useProjects", instead: "theloop moves items by loop:<phase> labels only and never touches GitHub Projects"},
	{key: "ticketing.jira.project", read: true},
	{key: "ticketing.jira.transitions", read: true},
	{key: "ticketing.jira", instead: "only ticketing.jira.project and ticketing.jira.transitions are read; the Jira site and credentials come from the operator's cli-config.yaml"},
	{key: "repository", instead: "every command runs from the repository root; name the exact test command in verification.testCommand (a monorepo tool included)"},
	{key: "workflow.specDir", read: true},
	{key: "workflow.phaseLabelPrefix", read: true},
	{key: "workflow.phases", read: true, instead: "the phases phase selection offers"},
	{key: "workflow.specApproach", instead: "the shipped graphs fix the spec chain (requirements, design, testing plan, tasks); phase selection picks the phases"},
	{key: "workflow.requireHumanReviewPerPhase", instead: "the approval gates are nodes of the shipped graphs and always hold; phase selection can skip a whole phase"},
	{key: "workflow.capabilitiesDir", instead: "the capability-docs node records its work in execution-log.md (Capability docs, Documentation)"},
	{key: "workflow.learningsDir", instead: "theloop keeps no learnings directory"},
	{key: "tooling.unitTest", read: true, instead: "verification.testCommand when that is absent (one language's runner)"},
	{key: "tooling.lint.markdown", read: true, instead: "the markdown linter lint-artifacts runs over the node's artifacts"},
	{key: "tooling.packageManager", read: true, instead: "with tooling.unitTest: a uv, poetry or pipenv project's runner is started through it"},
	{key: "tooling.languages", instead: "not needed: the test command and the linter are named directly"},
	{key: "tooling.integrationTest", instead: "verify-tests runs one command: make verification.testCommand run the integration tests too"},
	{key: "tooling.lint", instead: "only tooling.lint.markdown is run; lint code from your test command"},
	{key: "tooling.typeCheck", instead: "type checks are not run separately; include them in verification.testCommand"},
	{key: "tooling.release", instead: "theloop does not release; your CI does"},
	{key: "customInstructions", read: true, instead: "the docs loopctl instructions lists and the agent reads first"},
	{key: "customInstructions.onMissing", instead: "a missing doc is always reported by loopctl instructions (exit 1 with --strict)"},
	{key: "testing.integrationTestGlobs", read: true},
	{key: "testing.gherkinDocstrings", instead: "no gate requires Gherkin docstrings; loopctl scenarios lists those the tests carry"},
	{key: "testing.linkRequirements", instead: "no gate links tests to requirements; the testing plan's Test matrix does"},
	{key: "apiSpecs", instead: "theloop generates no API specs or docs"},
	{key: "design", instead: "design.md is the design artifact; UI prototypes and screenshots are not checked"},
	{key: "localOrchestration", instead: "theloop starts no containers; loopd runs each agent in its own sandbox"},
	{key: "hooks", instead: "theloop installs no git hooks and runs nothing from the repository but the test command and the markdown linter"},
	{key: "observability", instead: "a repository does not configure logging; loopd's logs are the operator's"},
	{key: "reviews.critics", read: true},
	{key: "reviews.selfReviewCount", instead: "a review node is claimed once its section is written; claim again for another round"},
	{key: "reviews.criticReviewCount", instead: "run loopctl critic run as often as the node needs"},
	{key: "reviews.stopOnNoNewFindings", instead: "a review node passes when its section is written"},
	{key: "reviews.escalateOnRepeatFinding", instead: "always on: the same block twice in a row parks the node for a human"},
	{key: "autonomy", instead: "no risk tiers: every item meets the shipped graphs' human gates, and phase selection chooses its phases"},
	{key: "security.threatModel", instead: "always required: requirements.md and bugfix.md need a Security considerations section"},
	{key: "security.design", instead: "always required: design.md needs Security design and must answer every trust boundary and abuse case"},
	{key: "security.review", instead: "security-review is a node of the review chain (required in the pull-request loop); no sign-off tiers"},
	{key: "tdd", instead: "no test-first order is enforced; verify-tests runs the tests at implementation and verification"},
	{key: "minimalism", instead: "theloop gives no minimalism advice"},
	{key: "tokenEconomy.enabled", read: true, instead: "false turns model routing off"},
	{key: "tokenEconomy.modelRouting", read: true, instead: "the model of a critic that names none (loopctl critic run): the node's stage, its tier, raised to the work item's riskTierFloor, the tier's model for the critic's harness; the agent's session keeps the operator's model"},
	{key: "tokenEconomy", instead: "theloop chooses no effort, verbosity, compaction or delegation per stage (only tokenEconomy.modelRouting is read, for loopctl critic run): the session runs the harness and model the operator's routing chooses"},
	{key: "selfImprovement", instead: "theloop keeps no learnings index"},
	{key: "contextManagement", instead: "theloop neither clears nor compacts the agent's context; loopctl sessions reset starts a fresh conversation at the same node"},
	{key: "userInteraction.prSummary", instead: "the reviewer-briefing node requires the Pull requests section of execution-log.md"},
	{key: "userInteraction.diagramFormat", instead: "lint-artifacts checks every mermaid block; other formats are not checked"},
	{key: "userInteraction", instead: "the interaction mode is the operator's (routing); writing style is the plugin's writing guide"},
	{key: "notifications.enabled", read: true},
	{key: "notifications.events", read: true},
	{key: "externalTools", instead: "theloop installs no tools; name the docs describing yours in customInstructions"},
	{key: "graph.hooks", read: true, instead: "refused: theloop never runs a repository's hooks"},
	// theloop's own keys (the-loop has none for these).
	{key: "verification.testCommand", read: true},
	{key: "verification.timeout", read: true},
}

// HarnessKeysRead lists the harness-config keys theloop reads, in
// catalogue order.
func HarnessKeysRead() []string {
	var out []string
	for _, k := range harnessKeyCatalogue {
		if k.read {
			out = append(out, k.key)
		}
	}
	return out
}

// HarnessKeysUnread lists the catalogued keys of the-loop's harness config
// theloop does not read, in catalogue order.
func HarnessKeysUnread() []string {
	var out []string
	for _, k := range harnessKeyCatalogue {
		if !k.read {
			out = append(out, k.key)
		}
	}
	return out
}

// catalogued returns the entry for path: the longest catalogued key that
// is path or a prefix of it at a dot.
func catalogued(path string) (harnessKey, bool) {
	var best harnessKey
	found := false
	for _, k := range harnessKeyCatalogue {
		if (path == k.key || strings.HasPrefix(path, k.key+".")) && (!found || len(k.key) > len(best.key)) {
			best, found = k, true
		}
	}
	return best, found
}

// UnreadHarnessKey is one key a harness config sets that theloop does not
// read.
type UnreadHarnessKey struct {
	// Key is the catalogued key (or the unknown key as written).
	Key string `json:"key"`
	// Set lists the keys at or under Key the file sets, sorted.
	Set []string `json:"set"`
	// Instead is what theloop does instead ("" for a key the-loop does not
	// define either).
	Instead string `json:"instead"`
	// Known is false for a key neither the-loop nor theloop defines.
	Known bool `json:"known"`
}

// Warning is the key's one-line warning, naming the file.
func (u UnreadHarnessKey) Warning(file string) string {
	if !u.Known {
		return fmt.Sprintf("%s: %s is not a harness-config key of the-loop or theloop; it is ignored (a typo?)", file, u.Key)
	}
	return fmt.Sprintf("%s: %s is not read by theloop: %s", file, u.Key, u.Instead)
}

// UnreadHarnessKeys walks every key the decoded harness config sets and
// returns, per catalogued key theloop does not read, the keys set under
// it; and each key neither the-loop nor theloop defines. Sorted by key.
// raw must be the whole file (ParseHarnessConfigFull), not the fast
// parse's subset.
func UnreadHarnessKeys(raw map[string]any) []UnreadHarnessKey {
	byKey := map[string]*UnreadHarnessKey{}
	var walk func(prefix string, m map[string]any, depth int)
	walk = func(prefix string, m map[string]any, depth int) {
		for k, v := range m {
			path := k
			if prefix != "" {
				path = prefix + "." + k
			}
			entry, ok := catalogued(path)
			// A mapping with catalogued keys below it is looked into
			// (ticketing → ticketing.system; customInstructions.onMissing
			// under a read key): each of its keys is reported on its own.
			if sub, isMap := v.(map[string]any); isMap && depth < 4 && hasCataloguedBelow(path) {
				walk(path, sub, depth+1)
				continue
			}
			if ok && entry.read {
				continue
			}
			name, instead := path, ""
			if ok {
				name, instead = entry.key, entry.instead
			} else if prefix != "" {
				// An unknown key inside a known block is reported as written.
				name = path
			}
			u := byKey[name]
			if u == nil {
				u = &UnreadHarnessKey{Key: name, Instead: instead, Known: ok}
				byKey[name] = u
			}
			u.Set = append(u.Set, path)
		}
	}
	walk("", raw, 0)
	out := make([]UnreadHarnessKey, 0, len(byKey))
	for _, k := range slices.Sorted(maps.Keys(byKey)) {
		u := *byKey[k]
		slices.Sort(u.Set)
		out = append(out, u)
	}
	return out
}

func hasCataloguedBelow(path string) bool {
	for _, k := range harnessKeyCatalogue {
		if strings.HasPrefix(k.key, path+".") {
			return true
		}
	}
	return false
}

// HarnessReport is what `loopctl config harness` prints: the file, the
// keys theloop reads with their values, the warnings of the reader and
// every key it does not read.
type HarnessReport struct {
	File     string             `json:"file"`
	Present  bool               `json:"present"`
	Read     map[string]any     `json:"read"`
	Unread   []UnreadHarnessKey `json:"unread"`
	Warnings []string           `json:"warnings"`
}

// ReportHarnessConfig reads the repository's harness config whole (not the
// fast path the Stop hook takes) and reports what theloop reads of it and
// what it ignores.
func ReportHarnessConfig(repoRoot string) (HarnessReport, error) {
	rep := HarnessReport{Read: map[string]any{}, Unread: []UnreadHarnessKey{}, Warnings: []string{}}
	for _, rel := range []string{HarnessConfigFile, LegacyHarnessConfigFile} {
		data, exists, err := readConfigFile(filepath.Join(repoRoot, filepath.FromSlash(rel)))
		if !exists {
			continue
		}
		rep.File, rep.Present = rel, true
		if err != nil {
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("%s could not be read (%v); theloop uses the defaults", rel, err))
			return rep, nil
		}
		cfg, warns, perr := parseHarnessConfig(rel, data, false)
		if perr != nil {
			return rep, perr
		}
		rep.Warnings = append(rep.Warnings, warns...)
		_, cw := Critics(cfg)
		_, iw := InstructionEntries(cfg)
		_, _, sw := ScenarioGlobs(cfg, nil)
		rep.Warnings = append(append(append(rep.Warnings, cw...), iw...), sw...)
		for _, k := range HarnessKeysRead() {
			if v, found, _ := lookup(cfg.Raw, k); found {
				rep.Read[k] = v
			}
		}
		if cfg.TestCommand != nil {
			rep.Read["verification.testCommand (effective)"] = strings.Join(cfg.TestCommand, " ")
		}
		if cfg.MarkdownLinter != nil {
			rep.Read["tooling.lint.markdown (effective)"] = strings.Join(cfg.MarkdownLinter, " ")
		}
		rep.Unread = UnreadHarnessKeys(cfg.Raw)
		return rep, nil
	}
	rep.File = HarnessConfigFile
	return rep, nil
}

// readTooling maps the-loop's tooling keys onto what theloop runs:
// tooling.unitTest onto the test command when verification.testCommand is
// absent, tooling.lint.markdown onto the markdown linter. Both are the
// repository's commands, run like verification.testCommand: by the
// agent's side (inside its sandbox), never by loopd, and never under check.
func readTooling(r *keyReader, cfg *HarnessConfig) {
	if v, ok := r.get("tooling.unitTest"); ok && cfg.TestCommand == nil {
		if _, set := r.get("verification.testCommand"); !set {
			pm, _ := r.get("tooling.packageManager")
			argv, problem := unitTestCommand(v, pm)
			if problem != "" {
				r.add("tooling.unitTest: " + problem + "; set verification.testCommand to the exact command, e.g. \"go test ./...\"")
			} else {
				cfg.TestCommand = argv
			}
		}
	}
	if v, ok := r.get("tooling.lint.markdown"); ok {
		argv, problem := markdownLinterCommand(v)
		if problem != "" {
			r.add("tooling.lint.markdown: " + problem)
		} else {
			cfg.MarkdownLinter = argv
		}
	}
}

// runnerCommands are the test runners whose bare name is not the command
// that runs a project's tests.
var runnerCommands = map[string][]string{
	"go":     {"go", "test", "./..."},
	"gotest": {"go", "test", "./..."},
	"cargo":  {"cargo", "test"},
	"jest":   {"npx", "jest"},
	"vitest": {"npx", "vitest", "run"},
	"mocha":  {"npx", "mocha"},
	"npm":    {"npm", "test"},
	"yarn":   {"yarn", "test"},
	"pnpm":   {"pnpm", "test"},
	"maven":  {"mvn", "test"},
	"gradle": {"gradle", "test"},
	"dotnet": {"dotnet", "test"},
}

// pythonRunners start a Python tool inside the project's environment.
var pythonRunners = map[string][]string{"uv": {"uv", "run"}, "poetry": {"poetry", "run"}, "pipenv": {"pipenv", "run"}}

// unitTestCommand reads tooling.unitTest: a command, or a mapping of one
// language to its runner ({python: pytest}). Several languages name
// several commands, and theloop runs one: that is a problem to report.
func unitTestCommand(v, packageManager any) ([]string, string) {
	lang, tool := "", ""
	switch t := v.(type) {
	case string:
		tool = t
	case map[string]any:
		var set []string
		for l, x := range t {
			if s, ok := x.(string); ok && strings.TrimSpace(s) != "" {
				set = append(set, l)
			}
		}
		if len(set) != 1 {
			slices.Sort(set)
			return nil, fmt.Sprintf("names %d languages' runners (%s) and theloop runs one command", len(set), strings.Join(set, ", "))
		}
		lang, tool = set[0], t[set[0]].(string)
	default:
		return nil, fmt.Sprintf("expected a runner or {language: runner}, got %s", typeName(v))
	}
	argv, problem := commandWords(tool, runnerCommands)
	if problem != "" {
		return nil, problem
	}
	if lang == "python" {
		if pms, ok := packageManager.(map[string]any); ok {
			if pm, _ := pms["python"].(string); pythonRunners[pm] != nil && argv[0] != pm {
				argv = append(slices.Clone(pythonRunners[pm]), argv...)
			}
		}
	}
	return argv, ""
}

// markdownLinters are the linters whose bare name is not their command.
var markdownLinters = map[string][]string{
	"markdownlint":     {"markdownlint"},
	"markdownlint-cli": {"markdownlint"},
	"markdownlint2":    {"markdownlint-cli2"},
}

func markdownLinterCommand(v any) ([]string, string) {
	s, ok := v.(string)
	if !ok {
		return nil, fmt.Sprintf("expected the linter's command, e.g. markdownlint, got %s", typeName(v))
	}
	return commandWords(s, markdownLinters)
}

// commandWords splits a command into words (no shell), a bare tool name
// replaced by its command from known.
func commandWords(s string, known map[string][]string) ([]string, string) {
	argv, err := hooks.SplitWords(s)
	if err != nil || len(argv) == 0 {
		return nil, fmt.Sprintf("%q is not a command (words, no shell)", s)
	}
	if len(argv) == 1 {
		if full, ok := known[strings.ToLower(argv[0])]; ok {
			argv = slices.Clone(full)
		}
	}
	return argv, ""
}
