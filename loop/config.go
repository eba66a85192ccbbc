package loop

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/theloop-dev/theloop/hooks"
	"github.com/theloop-dev/theloop/internal/yamlguard"
	"github.com/theloop-dev/theloop/workitem"

	"github.com/goccy/go-yaml"
)

// Sentinel errors. Compare with errors.Is; the wrapping error names the
// file, key or id and the fix.
var (
	// ErrInvalidID: a work item id that cannot name one directory.
	ErrInvalidID = errors.New("invalid work item id")
	// ErrUnsafePath: a configured or derived path that is absolute or
	// escapes the directory it must stay inside.
	ErrUnsafePath = errors.New("path escapes the repository")
	// ErrInvalidConfig: a configuration file that does not parse, or whose
	// keys have the wrong type.
	ErrInvalidConfig = errors.New("invalid configuration")
	// ErrConfigTooOld: the CLI config still carries a removed key or
	// declares a version older than CurrentCLIConfigVersion; it must be
	// migrated before theloop uses it.
	ErrConfigTooOld = errors.New("configuration must be migrated")
	// ErrRepoNotFound: the repository root does not exist or is not a
	// directory.
	ErrRepoNotFound = errors.New("repository not found")
	// ErrTooLarge: a file the agent can write (graph-state.json, an
	// artifact) is larger than theloop reads; it was refused before it
	// was read into memory.
	ErrTooLarge = errors.New("file too large")
)

// Defaults of the repository's harness config (docs/daemon.md §12.3).
const (
	DefaultSpecDir          = "docs/specs"
	DefaultPhaseLabelPrefix = "loop:"
)

// Repository configuration file locations, relative to the repository root.
const (
	HarnessConfigFile       = ".the-loop/harness-config.yaml"
	LegacyHarnessConfigFile = ".the-loop/config.yaml"
	CollaboratorsFile       = ".the-loop/collaborators.yaml"
)

// maxConfigBytes bounds a configuration file read into memory; real ones
// are a few kilobytes.
const maxConfigBytes = 1 << 20

// maxConfigNodes bounds the values a decoded configuration expands to
// through YAML anchors and aliases, so that a repository file cannot make a
// later walk of Raw (JSON encoding, for instance) explode.
const maxConfigNodes = 100_000

// ShippedLoopNames are the graphs theloop ships (docs/decisions.md §14).
func ShippedLoopNames() []string {
	return []string{"pdlc-work-item-loop", "pdlc-pr-loop", "pdlc-adhoc-loop", "pdlc-contribution-loop"}
}

// --- YAML helpers ----------------------------------------------------------

// decodeYAMLMap decodes one YAML document into a string-keyed map. An empty
// document is an empty map. Panics of the YAML library become errors, and
// documents that expand past maxConfigNodes are refused. The error carries
// the line and column and a caret excerpt.
func decodeYAMLMap(name string, data []byte) (m map[string]any, err error) {
	return decodeYAMLMapWithin(name, data, maxConfigBytes)
}

// maxRepoConfigBytes bounds what theloop parses of a repository's own
// configuration files (harness config, collaborators), which the agent can
// write: the-loop's own harness config is 10 KB, and the YAML library
// spends some 50 bytes of memory per byte of input.
const maxRepoConfigBytes = 256 << 10

// decodeYAMLMapWithin is decodeYAMLMap refusing documents over maxBytes.
func decodeYAMLMapWithin(name string, data []byte, maxBytes int) (m map[string]any, err error) {
	defer func() {
		if r := recover(); r != nil {
			m, err = nil, fmt.Errorf("%s: the YAML parser failed on this file: %v", name, r)
		}
	}()
	if len(data) > maxBytes {
		return nil, fmt.Errorf("%s: %d bytes is larger than the %d a configuration file may have", name, len(data), maxBytes)
	}
	if err := yamlguard.Check(data, yamlguard.Limits{MaxBytes: maxBytes, MaxDepth: yamlguard.Default.MaxDepth, MaxIndent: yamlguard.Default.MaxIndent}); err != nil {
		return nil, fmt.Errorf("%s: %v; theloop refuses it before parsing — no configuration needs that", name, err)
	}
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("%s: not valid YAML: %s", name, yaml.FormatError(err, false, true))
	}
	if v == nil {
		return map[string]any{}, nil
	}
	top, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: the file must be a YAML mapping of keys, not %s", name, typeName(v))
	}
	budget := maxConfigNodes
	if !withinBudget(top, &budget) {
		return nil, fmt.Errorf("%s: the file expands to more than %d values through anchors and aliases; remove the alias chains", name, maxConfigNodes)
	}
	return top, nil
}

// withinBudget walks v, spending one unit of budget per value, and reports
// whether the walk finished within it.
func withinBudget(v any, budget *int) bool {
	*budget--
	if *budget < 0 {
		return false
	}
	switch t := v.(type) {
	case map[string]any:
		for _, e := range t {
			if !withinBudget(e, budget) {
				return false
			}
		}
	case []any:
		for _, e := range t {
			if !withinBudget(e, budget) {
				return false
			}
		}
	}
	return true
}

// typeName names a decoded YAML value's type for error messages.
func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	case float32, float64:
		return "a number"
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return "a number"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// lookup follows a dotted path of mapping keys. It returns the value and
// whether the path exists. When an intermediate value is neither a mapping
// nor null, bad names the key holding it and v is that value.
func lookup(m map[string]any, path string) (v any, found bool, bad string) {
	cur := any(m)
	parts := strings.Split(path, ".")
	for i, p := range parts {
		mm, ok := cur.(map[string]any)
		if !ok {
			if cur == nil {
				return nil, false, ""
			}
			return cur, false, strings.Join(parts[:i], ".")
		}
		cur, ok = mm[p]
		if !ok {
			return nil, false, ""
		}
	}
	return cur, true, ""
}

// keyReader reads typed values out of a decoded map, collecting a problem
// for each key present with the wrong type (null counts as absent).
type keyReader struct {
	m        map[string]any
	problems []string
}

func (r *keyReader) get(path string) (any, bool) {
	v, found, bad := lookup(r.m, path)
	if bad != "" {
		r.problem(bad, "a mapping", v)
		return nil, false
	}
	if !found || v == nil {
		return nil, false
	}
	return v, true
}

func (r *keyReader) problem(key, want string, got any) {
	r.add(fmt.Sprintf("%s: expected %s, got %s", key, want, typeName(got)))
}

// add records a problem once (a scalar where a mapping belongs would
// otherwise be reported for every key read beneath it).
func (r *keyReader) add(msg string) {
	for _, p := range r.problems {
		if p == msg {
			return
		}
	}
	r.problems = append(r.problems, msg)
}

func (r *keyReader) str(path string) (string, bool) {
	v, ok := r.get(path)
	if !ok {
		return "", false
	}
	s, isStr := v.(string)
	if !isStr {
		r.problem(path, "a string", v)
		return "", false
	}
	return s, true
}

func (r *keyReader) boolean(path string) (bool, bool) {
	v, ok := r.get(path)
	if !ok {
		return false, false
	}
	b, isBool := v.(bool)
	if !isBool {
		r.problem(path, "true or false", v)
		return false, false
	}
	return b, true
}

func (r *keyReader) strings(path string) ([]string, bool) {
	v, ok := r.get(path)
	if !ok {
		return nil, false
	}
	return r.stringList(path, v)
}

func (r *keyReader) stringList(path string, v any) ([]string, bool) {
	list, isList := v.([]any)
	if !isList {
		r.problem(path, "a list of strings", v)
		return nil, false
	}
	out := make([]string, 0, len(list))
	for i, e := range list {
		s, isStr := e.(string)
		if !isStr {
			r.add(fmt.Sprintf("%s[%d]: expected a string, got %s", path, i, typeName(e)))
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

func (r *keyReader) mapping(path string) (map[string]any, bool) {
	v, ok := r.get(path)
	if !ok {
		return nil, false
	}
	mm, isMap := v.(map[string]any)
	if !isMap {
		r.problem(path, "a mapping", v)
		return nil, false
	}
	return mm, true
}

// cleanRelativeDir validates a directory that must stay inside the
// repository: relative, not "." and never climbing out through "..". It
// returns the cleaned, slash-separated form.
func cleanRelativeDir(key, dir string) (string, error) {
	if dir == "" {
		return "", fmt.Errorf("%w: %s is empty; set it to a directory inside the repository such as %s", ErrUnsafePath, key, DefaultSpecDir)
	}
	if strings.ContainsRune(dir, 0) {
		return "", fmt.Errorf("%w: %s %q contains NUL", ErrUnsafePath, key, dir)
	}
	slash := filepath.ToSlash(dir)
	if strings.HasPrefix(slash, "/") || filepath.IsAbs(dir) || filepath.VolumeName(dir) != "" {
		return "", fmt.Errorf("%w: %s %q is absolute; use a path relative to the repository root such as %s", ErrUnsafePath, key, dir, DefaultSpecDir)
	}
	clean := filepath.ToSlash(filepath.Clean(dir))
	if clean == "." {
		return "", fmt.Errorf("%w: %s %q is the repository root; use a sub-directory such as %s", ErrUnsafePath, key, dir, DefaultSpecDir)
	}
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("%w: %s %q leaves the repository; use a path inside it such as %s", ErrUnsafePath, key, dir, DefaultSpecDir)
	}
	return clean, nil
}

// ValidateSpecDir checks a spec directory setting (workflow.specDir,
// routing.graph.specDir): it must be relative to the repository root and
// stay inside it. The error wraps ErrUnsafePath and names key.
func ValidateSpecDir(key, dir string) error {
	_, err := cleanRelativeDir(key, dir)
	return err
}

// readConfigFile reads a configuration file, reporting absence separately.
// Files larger than maxConfigBytes are refused.
func readConfigFile(path string) (data []byte, exists bool, err error) {
	f, err := openRegular(path, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, true, err
	}
	defer f.Close()
	data, err = io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return nil, true, err
	}
	if len(data) > maxConfigBytes {
		return nil, true, fmt.Errorf("the file is larger than the %d bytes a configuration file may have", maxConfigBytes)
	}
	return data, true, nil
}

// --- Harness config (per repository) --------------------------------------

// HarnessConfig is what theloop reads from a repository's
// .the-loop/harness-config.yaml (or the legacy .the-loop/config.yaml).
// The repository is untrusted input: it can choose where its specs live and
// how its labels look, never how theloop runs (no hooks, no credentials, no
// authorized users).
type HarnessConfig struct {
	// Present is true when the file exists (the repository is initialised
	// for the-loop), even if it could not be used.
	Present bool
	// Path is the file read, relative to the repository root ("" if none).
	Path string
	// SpecDir is workflow.specDir, cleaned and relative to the repository
	// root (default DefaultSpecDir).
	SpecDir string
	// PhaseLabelPrefix is workflow.phaseLabelPrefix (default "loop:").
	PhaseLabelPrefix string
	// Phases is workflow.phases (nil when absent).
	Phases []string
	// Owner and Repo are ticketing.github.owner and .repo.
	Owner, Repo string
	// JiraProject is ticketing.jira.project: work items whose id is an
	// issue key of this project (PROJ-123) are tracked in Jira, their ref
	// jira:PROJ-123, and their ticket effects go through the Jira provider.
	JiraProject string
	// JiraTransitions is ticketing.jira.transitions: a phase (the node's
	// phase label, e.g. implementation) → the Jira transition (id, name or
	// target status) set-phase-label performs besides the label.
	JiraTransitions map[string]string
	// Notifications is the notifications block.
	Notifications Notifications
	// TestCommand is verification.testCommand as argv: the repository's
	// test command, which verify-tests runs inside the agent's sandbox
	// (never in loopd). nil when absent.
	TestCommand []string
	// MarkdownLinter is tooling.lint.markdown as argv: the markdown linter
	// lint-artifacts runs over a node's artifacts, on the agent's side like
	// the test command (nil when absent).
	MarkdownLinter []string
	// TestTimeout is verification.timeout (0: hooks.DefaultTestTimeout).
	TestTimeout time.Duration
	// Raw holds the decoded top-level keys theloop reads (empty when absent
	// or unparseable).
	Raw map[string]any
}

// Notifications maps notify events to the roles to notify.
type Notifications struct {
	// Enabled is notifications.enabled (default true).
	Enabled bool
	// Events maps an event name (phase-approval-pending, ...) to roles.
	Events map[string][]string
}

// Roles returns the roles notified of event (nil when disabled or none).
func (n Notifications) Roles(event string) []string {
	if !n.Enabled {
		return nil
	}
	return n.Events[event]
}

// OriginRepo returns "owner/repo" from ticketing.github, or "" when either
// half is missing or not a name a work-item ref may hold
// (workitem.ValidName).
func (h HarnessConfig) OriginRepo() string {
	if !workitem.ValidName(h.Owner) || !workitem.ValidName(h.Repo) {
		return ""
	}
	return h.Owner + "/" + h.Repo
}

// DefaultHarnessConfig is the configuration of a repository without a
// harness config file.
func DefaultHarnessConfig() HarnessConfig {
	return HarnessConfig{
		SpecDir:          DefaultSpecDir,
		PhaseLabelPrefix: DefaultPhaseLabelPrefix,
		Notifications:    Notifications{Enabled: true, Events: map[string][]string{}},
		Raw:              map[string]any{},
	}
}

// LoadHarnessConfig reads the repository's harness config: harness-config.yaml,
// else the legacy config.yaml, else defaults. Reading is best-effort, as in
// the-loop: an unreadable or unparseable file, or a key of the wrong type,
// yields the defaults for what could not be read plus a warning naming the
// file and key. The one error is a workflow.specDir that is absolute or
// leaves the repository (wrapping ErrUnsafePath): theloop must never read
// or write state outside the checkout, so it refuses rather than guess.
func LoadHarnessConfig(repoRoot string) (HarnessConfig, []string, error) {
	for _, rel := range []string{HarnessConfigFile, LegacyHarnessConfigFile} {
		data, exists, err := readConfigFile(filepath.Join(repoRoot, filepath.FromSlash(rel)))
		if !exists {
			continue
		}
		if err != nil {
			cfg := DefaultHarnessConfig()
			cfg.Present, cfg.Path = true, rel
			return cfg, []string{fmt.Sprintf("%s could not be read (%v); using the defaults", rel, err)}, nil
		}
		cfg, warnings, perr := ParseHarnessConfig(rel, data)
		cfg.Present = true
		return cfg, warnings, perr
	}
	return DefaultHarnessConfig(), nil, nil
}

// ParseHarnessConfig decodes a harness config file's bytes; name is used in
// messages and as Path. See LoadHarnessConfig for the error policy. It never
// panics.
func ParseHarnessConfig(name string, data []byte) (HarnessConfig, []string, error) {
	return parseHarnessConfig(name, data, true)
}

// harnessKeys are the top-level keys of a harness config theloop reads.
var harnessKeys = map[string]bool{"version": true, "workflow": true, "ticketing": true, "notifications": true, "graph": true, "reviews": true, "verification": true, "testing": true, "customInstructions": true, "tooling": true}

// parseHarnessConfig decodes the file; with fast it first decodes only the
// top-level blocks theloop reads (a repository's harness config is mostly
// settings for the agent: the-loop's own is 300 lines, which costs the Stop
// hook milliseconds to parse whole). Anything the fast path cannot decode
// falls back to the whole file, so errors and their line numbers are the
// full parser's. The one difference: a syntax error confined to a block
// theloop does not read is not seen, and the settings it does read apply.
func parseHarnessConfig(name string, data []byte, fast bool) (HarnessConfig, []string, error) {
	cfg := DefaultHarnessConfig()
	cfg.Path = name
	var raw map[string]any
	var err error
	if part, ok := topLevelBlocks(data, harnessKeys); fast && ok {
		raw, err = decodeYAMLMapWithin(name, part, maxRepoConfigBytes)
	}
	if raw == nil || err != nil {
		raw, err = decodeYAMLMapWithin(name, data, maxRepoConfigBytes)
	}
	if err != nil {
		return cfg, []string{err.Error() + "; using the defaults (the file is best-effort; fix it to apply its settings)"}, nil
	}
	cfg.Raw = raw
	r := &keyReader{m: raw}
	if dir, ok := r.str("workflow.specDir"); ok {
		clean, err := cleanRelativeDir(name+": workflow.specDir", dir)
		if err != nil {
			return cfg, nil, err
		}
		cfg.SpecDir = clean
	}
	if p, ok := r.str("workflow.phaseLabelPrefix"); ok {
		if strings.TrimSpace(p) == "" {
			r.add("workflow.phaseLabelPrefix: is empty; phase labels need a prefix such as \"loop:\"")
		} else {
			cfg.PhaseLabelPrefix = p
		}
	}
	if phases, ok := r.strings("workflow.phases"); ok {
		cfg.Phases = phases
	}
	before := len(r.problems)
	if o, ok := r.str("ticketing.github.owner"); ok {
		cfg.Owner = o
	}
	if rp, ok := r.str("ticketing.github.repo"); ok {
		cfg.Repo = rp
	}
	if len(r.problems) == before && (cfg.Owner != "" || cfg.Repo != "") && cfg.OriginRepo() == "" {
		r.add(fmt.Sprintf("ticketing.github.owner/repo: %q/%q is not a repository name ([A-Za-z0-9._-]+ each); work item refs will not be derived", cfg.Owner, cfg.Repo))
	}
	if p, ok := r.str("ticketing.jira.project"); ok {
		if workitem.ValidJiraProject(p) {
			cfg.JiraProject = p
		} else {
			r.add(fmt.Sprintf("ticketing.jira.project: %q is not a Jira project key (upper-case letters, digits and _, starting with a letter, e.g. PROJ); Jira work items will not be recognised", p))
		}
	}
	if m, ok := r.mapping("ticketing.jira.transitions"); ok {
		for _, phase := range slices.Sorted(maps.Keys(m)) {
			t, isStr := m[phase].(string)
			if !isStr || strings.TrimSpace(t) == "" {
				r.problem("ticketing.jira.transitions."+phase, "a transition id, name or target status", m[phase])
				continue
			}
			if cfg.JiraTransitions == nil {
				cfg.JiraTransitions = map[string]string{}
			}
			cfg.JiraTransitions[phase] = strings.TrimSpace(t)
		}
		if cfg.JiraProject == "" && len(cfg.JiraTransitions) > 0 {
			r.add("ticketing.jira.transitions: set without ticketing.jira.project; no work item is tracked in Jira")
		}
	}
	if en, ok := r.boolean("notifications.enabled"); ok {
		cfg.Notifications.Enabled = en
	}
	if events, ok := r.mapping("notifications.events"); ok {
		for _, ev := range slices.Sorted(maps.Keys(events)) {
			if events[ev] == nil {
				continue
			}
			if roles, ok := r.stringList("notifications.events."+ev, events[ev]); ok {
				cfg.Notifications.Events[ev] = roles
			}
		}
	}
	readVerification(r, &cfg)
	readTooling(r, &cfg)
	if _, ok := r.get("graph.hooks"); ok {
		r.add("graph.hooks: repository hooks are never run by theloop (no code from a watched repository is executed); the key is ignored")
	}
	warnings := make([]string, 0, len(r.problems))
	for _, p := range r.problems {
		warnings = append(warnings, name+": "+p)
	}
	return cfg, warnings, nil
}

// readVerification reads verification.testCommand and verification.timeout.
// A bad value is left out with a warning naming the key and a valid form,
// like every harness-config key: the file is best-effort.
func readVerification(r *keyReader, cfg *HarnessConfig) {
	if v, ok := r.get("verification.testCommand"); ok {
		var argv []string
		read := true
		switch t := v.(type) {
		case string:
			words, err := hooks.SplitWords(t)
			if err != nil {
				r.add(fmt.Sprintf("verification.testCommand: %v; write it as words (no shell), e.g. \"go test ./...\" or a list [sh, -c, \"make test\"]", err))
				read = false
				break
			}
			argv = words
		case []any:
			argv, read = r.stringList("verification.testCommand", t)
		default:
			r.problem("verification.testCommand", "a command string or a list of strings", v)
			read = false
		}
		if read && (len(argv) == 0 || strings.TrimSpace(argv[0]) == "") {
			r.add("verification.testCommand: is empty; name the program, e.g. \"go test ./...\"")
			argv = nil
		}
		cfg.TestCommand = argv
	}
	if v, ok := r.get("verification.timeout"); ok {
		d, ok := parseTimeout(v)
		switch {
		case !ok:
			r.add(fmt.Sprintf("verification.timeout: expected seconds or a duration such as \"10m\", got %s; using %s", typeName(v), hooks.DefaultTestTimeout))
		case d > hooks.MaxTestTimeout:
			r.add(fmt.Sprintf("verification.timeout: %s is more than the %s a test run may take; using %s", d, hooks.MaxTestTimeout, hooks.MaxTestTimeout))
			cfg.TestTimeout = hooks.MaxTestTimeout
		default:
			cfg.TestTimeout = d
		}
	}
	if cfg.TestTimeout > 0 && cfg.TestCommand == nil {
		r.add("verification.timeout: set without verification.testCommand; it has nothing to bound")
	}
}

// parseTimeout reads a positive number of seconds or a Go duration.
func parseTimeout(v any) (time.Duration, bool) {
	switch t := v.(type) {
	case int:
		if t > 0 {
			return time.Duration(t) * time.Second, true
		}
	case int64:
		if t > 0 {
			return time.Duration(t) * time.Second, true
		}
	case uint64:
		if t > 0 && t < 1<<31 {
			return time.Duration(t) * time.Second, true
		}
	case float64:
		if t > 0 && t < 1<<31 {
			return time.Duration(t * float64(time.Second)), true
		}
	case string:
		if d, err := time.ParseDuration(strings.TrimSpace(t)); err == nil && d > 0 {
			return d, true
		}
	}
	return 0, false
}

// RepoGraphWarnings reports repository files that would declare or override
// a graph — .the-loop/graph.yaml, .the-loop/pdlc.yaml or
// .the-loop/<shipped loop name>.yaml (or .yml). theloop reads nothing from
// them: graphs declared by a repository are a future feature, and a
// repository must not be able to change the process it is held to. Each
// warning names the file.
func RepoGraphWarnings(repoRoot string) []string {
	names := append([]string{"graph", "pdlc"}, ShippedLoopNames()...)
	var warnings []string
	for _, n := range names {
		for _, ext := range []string{".yaml", ".yml"} {
			rel := ".the-loop/" + n + ext
			if _, err := os.Lstat(filepath.Join(repoRoot, filepath.FromSlash(rel))); err == nil {
				warnings = append(warnings, fmt.Sprintf("%s is ignored: graphs declared by a repository are a future feature; theloop runs its shipped graphs", rel))
			}
		}
	}
	return warnings
}

// parseVersion parses a dotted numeric version ("0.5.0", "1.2").
func parseVersion(s string) ([]int, bool) {
	s = strings.TrimPrefix(strings.TrimSpace(s), "v")
	if s == "" {
		return nil, false
	}
	parts := strings.Split(s, ".")
	out := make([]int, len(parts))
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return nil, false
		}
		out[i] = n
	}
	return out, true
}

// compareVersions compares dotted versions numerically, missing parts 0.
func compareVersions(a, b []int) int {
	for i := 0; i < len(a) || i < len(b); i++ {
		var x, y int
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return 0
}

// --- CLI config (the operator's) ------------------------------------------

// CLI config constants (docs/daemon.md §12).
const (
	// CurrentCLIConfigVersion is the oldest cli-config.yaml version theloop
	// accepts (numeric dotted comparison; a missing version is accepted).
	CurrentCLIConfigVersion = "0.5.0"
	// CLIConfigEnv names the variable that may point at the CLI config.
	CLIConfigEnv = "THE_LOOP_CLI_CONFIG"
	// CLIConfigFile is looked for under the working directory, then under
	// the home directory.
	CLIConfigFile = ".the-loop/cli-config.yaml"
	// DefaultStateRoot is state.root's default.
	DefaultStateRoot = ".the-loop"
	// StateRootEnv names the variable that overrides state.root. loopd
	// sets it in every session it spawns.
	StateRootEnv = "THE_LOOP_STATE_ROOT"
)

// OperatorStateRoot resolves theloop's state root — the daemon's queue,
// session registry, control socket, dashboard login and decision-signing
// key — the one way loopd, loopctl's operator verbs (keys, dashboard,
// sessions, daemon, queue, the signer of live verbs) and loop-gate share:
// $THE_LOOP_STATE_ROOT, else the CLI config's state.root, a relative one
// taken under the home directory. Never the working directory: the
// programs run in different places (loopd wherever it was started, the
// gate in the agent's checkout), and a state root inside a repository
// would put the signing key where the agent can read it. A --state-root
// flag, when a program has one, goes before all of this (callers apply it).
func OperatorStateRoot(configured string, getenv func(string) string, homeDir func() (string, error)) (string, error) {
	if r := getenv(StateRootEnv); r != "" {
		return filepath.Abs(r)
	}
	if configured == "" {
		configured = DefaultStateRoot
	}
	if filepath.IsAbs(configured) {
		return filepath.Clean(configured), nil
	}
	home, err := homeDir()
	if err != nil || home == "" {
		return "", fmt.Errorf("the state root %q is relative and there is no home directory to take it under; pass --state-root or set %s to an absolute path", configured, StateRootEnv)
	}
	if strings.HasPrefix(configured, "~") {
		return filepath.Clean(expandHome(configured, home)), nil
	}
	return filepath.Join(home, configured), nil
}

// routing.tmux.sessionPerPr modes (docs/graph.md §5.1).
const (
	SessionPerPrNever           = "never"
	SessionPerPrCrossRepository = "cross-repository"
	SessionPerPrAlways          = "always"
)

// ControlCommands lists the control commands in the order a comment is
// searched for them (docs/daemon.md §5.1).
func ControlCommands() []string {
	return []string{"start", "stop", "pause", "resume", "execute", "contribute", "cleanup", "do"}
}

// routing.interaction.mode values (docs/daemon.md §10).
const (
	InteractionWorkItem = "work-item"
	InteractionCLI      = "cli"
)

// ResolveInteractionMode trims and lower-cases v; an unknown value is
// work-item with a warning naming the key, never cli (docs/daemon.md §10).
// The settings reader and the daemon (for a Config an embedder built) both
// resolve the mode through it.
func ResolveInteractionMode(v string) (mode, warning string) {
	m := strings.ToLower(strings.TrimSpace(v))
	switch m {
	case InteractionWorkItem, InteractionCLI:
		return m, ""
	case "":
		return InteractionWorkItem, ""
	}
	return InteractionWorkItem, fmt.Sprintf("routing.interaction.mode: unknown value %q; using work-item (the values are work-item and cli)", v)
}

// DefaultControlKeywords returns routing.control.keywords' defaults:
// "the-loop <command>" for every command.
func DefaultControlKeywords() map[string]string {
	kw := make(map[string]string, 8)
	for _, c := range ControlCommands() {
		kw[c] = "the-loop " + c
	}
	return kw
}

// removedCLIKeys are keys the-loop removed, with their replacements
// (docs/daemon.md §12.1). A config carrying one is refused rather
// than half-applied. The reference also removed integrations.slack in
// favour of channels.slack; theloop's integrations package configures its
// Slack provider under integrations.slack again, so that key is accepted.
var removedCLIKeys = []struct{ key, replacement string }{
	{"webhooks.ghWebhook.routing", "the top-level routing block"},
	{"routing.control.ghBinary", "integrations.github.cli.binary"},
	{"routing.reactions.ghBinary", "integrations.github.cli.binary"},
	{"routing.announce.ghBinary", "integrations.github.cli.binary"},
	{"polling.stateFile", "state.root"},
	{"service.cors", "nothing: the control plane sends no CORS headers"},
}

// CLIConfig is the operator's cli-config.yaml: how theloop runs on this
// machine. Unlike a repository's harness config it is trusted and must not
// be silently ignored: a file that does not parse or has a mistyped key is
// an error.
type CLIConfig struct {
	// Path is the file read ("" when none was found: defaults).
	Path string
	// Version is the declared version ("" when absent).
	Version string
	// StateRoot is state.root (default ".the-loop"; a leading "~/" is
	// expanded by LoadCLIConfig). OperatorStateRoot resolves a relative
	// one under the home directory.
	StateRoot string
	// AuthorizedUsers is routing.authorizedUsers with empty entries
	// dropped. Empty denies every named actor (fail closed).
	AuthorizedUsers []string
	// Keywords maps each of ControlCommands to its keyword
	// (routing.control.keywords; "" disables that one command).
	Keywords map[string]string
	// ExecuteKeyword is Keywords["execute"].
	ExecuteKeyword string
	// SessionPerPr is routing.tmux.sessionPerPr resolved to one of the
	// SessionPerPr modes.
	SessionPerPr string
	// EventLogEnabled is eventLog.enabled (default true).
	EventLogEnabled bool
	// EventLogPath is eventLog.path (default <StateRoot>/logs/events.jsonl).
	EventLogPath string
	// EventLogPathSet reports that eventLog.path was written in the file
	// (not the default derived from state.root). loopd keeps its log under
	// its own state root unless the operator named a path.
	EventLogPathSet bool
	// GraphSpecDir is routing.graph.specDir, the operator's override of a
	// repository's workflow.specDir ("" = the repository decides).
	GraphSpecDir string
	// Integrations is the raw integrations block (nil when absent), for
	// the integrations package to decode.
	Integrations map[string]any
	// Settings is the whole file, read once by the catalogue's readers
	// (settings.go); loopd, the receiver's configuration and `config show`
	// take their values from it (resolved with Settings.Resolve).
	Settings Settings
	// Warnings are problems that do not stop theloop (an unknown
	// sessionPerPr value, a removed runner setting, ...).
	Warnings []string
}

// DefaultCLIConfig is the configuration used when no file is found.
func DefaultCLIConfig() CLIConfig {
	st, _, _ := readSettings("", map[string]any{})
	return cliConfigFromSettings(st)
}

// cliConfigFromSettings fills the fields the CLI and the gate use from the
// settings read (no second reading of the file).
func cliConfigFromSettings(st Settings) CLIConfig {
	ev := st.EventLog.Path
	set := st.shown["eventLog.path"].Source != SourceDefault && ev != ""
	if !set {
		ev = filepath.Join(st.StateRoot, "logs", "events.jsonl")
	}
	return CLIConfig{
		Path:            st.File,
		Version:         st.Version,
		StateRoot:       st.StateRoot,
		AuthorizedUsers: st.Routing.AuthorizedUsers,
		Keywords:        maps.Clone(st.Routing.Keywords),
		ExecuteKeyword:  st.Routing.Keywords["execute"],
		SessionPerPr:    st.Routing.Tmux.SessionPerPr,
		EventLogEnabled: st.EventLog.Enabled,
		EventLogPath:    ev,
		EventLogPathSet: set,
		GraphSpecDir:    st.Routing.GraphSpecDir,
		Integrations:    st.Integrations,
		Settings:        st,
		Warnings:        slices.Clone(st.Warnings),
	}
}

// CLIConfigSource is where LoadCLIConfig looks, with the environment
// injected. Zero values mean the real process environment.
type CLIConfigSource struct {
	// Path is an explicit file (--config); it must exist.
	Path string
	// LookupEnv reads environment variables (default os.LookupEnv).
	LookupEnv func(string) (string, bool)
	// HomeDir returns the home directory (default os.UserHomeDir).
	HomeDir func() (string, error)
	// WorkDir is the directory ./.the-loop/cli-config.yaml is relative to
	// (default the process's working directory).
	WorkDir string
}

func (src CLIConfigSource) withDefaults() CLIConfigSource {
	if src.LookupEnv == nil {
		src.LookupEnv = os.LookupEnv
	}
	if src.HomeDir == nil {
		src.HomeDir = os.UserHomeDir
	}
	if src.WorkDir == "" {
		src.WorkDir = "."
	}
	return src
}

// ResolveCLIConfigPath picks the CLI config file by priority (reference
// docs/daemon.md §12.1): the explicit path › $THE_LOOP_CLI_CONFIG ›
// ./.the-loop/cli-config.yaml › ~/.the-loop/cli-config.yaml. An explicit
// path or the variable names a file that must exist (required is true);
// the two default locations are used only when present. path is "" when
// nothing applies.
func ResolveCLIConfigPath(src CLIConfigSource) (path string, required bool) {
	src = src.withDefaults()
	if src.Path != "" {
		return src.Path, true
	}
	if p, ok := src.LookupEnv(CLIConfigEnv); ok && p != "" {
		return p, true
	}
	local := filepath.Join(src.WorkDir, filepath.FromSlash(CLIConfigFile))
	if _, err := os.Stat(local); err == nil {
		return local, false
	}
	if home, err := src.HomeDir(); err == nil && home != "" {
		p := filepath.Join(home, filepath.FromSlash(CLIConfigFile))
		if _, err := os.Stat(p); err == nil {
			return p, false
		}
	}
	return "", false
}

// LoadCLIConfig resolves and reads the operator's CLI config. No file found
// yields DefaultCLIConfig. An explicit or $THE_LOOP_CLI_CONFIG file that is
// missing or unreadable, a file that does not parse (the error names the
// line), a mistyped key (ErrInvalidConfig), and a removed key or a version
// older than CurrentCLIConfigVersion (ErrConfigTooOld) are errors. A
// leading "~/" in state.root and eventLog.path is expanded.
func LoadCLIConfig(src CLIConfigSource) (CLIConfig, error) {
	src = src.withDefaults()
	path, required := ResolveCLIConfigPath(src)
	if path == "" {
		return DefaultCLIConfig(), nil
	}
	data, exists, err := readConfigFile(path)
	if !exists {
		if required {
			how := "--config"
			if src.Path == "" {
				how = "$" + CLIConfigEnv
			}
			return CLIConfig{}, fmt.Errorf("%w: the CLI config %s (named by %s) does not exist; create it or point %s at an existing file", ErrInvalidConfig, path, how, how)
		}
		return DefaultCLIConfig(), nil
	}
	if err != nil {
		return CLIConfig{}, fmt.Errorf("%w: reading the CLI config %s: %v", ErrInvalidConfig, path, err)
	}
	cfg, err := ParseCLIConfig(path, data)
	if err != nil {
		return CLIConfig{}, err
	}
	if home, herr := src.HomeDir(); herr == nil && home != "" {
		cfg.StateRoot = expandHome(cfg.StateRoot, home)
		cfg.EventLogPath = expandHome(cfg.EventLogPath, home)
	}
	return cfg, nil
}

func expandHome(p, home string) string {
	if p == "~" {
		return home
	}
	if strings.HasPrefix(p, "~/") {
		return filepath.Join(home, p[2:])
	}
	return p
}

// ParseCLIConfig decodes a CLI config's bytes; name is the file, used in
// messages and as Path. See LoadCLIConfig for the error policy. It never
// panics.
func ParseCLIConfig(name string, data []byte) (CLIConfig, error) {
	cfg := DefaultCLIConfig()
	cfg.Path = name
	raw, err := decodeYAMLMap(name, data)
	if err != nil {
		return CLIConfig{}, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	if len(raw) == 0 {
		return cfg, nil
	}
	if err := checkCLIConfigCurrent(name, raw); err != nil {
		return CLIConfig{}, err
	}
	if err := CheckCLIConfigKeys(name, raw); err != nil {
		return CLIConfig{}, err
	}
	st, problems, err := readSettings(name, raw)
	if err != nil {
		return CLIConfig{}, err
	}
	if len(problems) > 0 {
		return CLIConfig{}, fmt.Errorf("%w: %s: %s; fix the key(s) — the operator's configuration is never ignored", ErrInvalidConfig, name, strings.Join(problems, "; "))
	}
	cfg = cliConfigFromSettings(st)
	cfg.Path = name
	return cfg, nil
}

// checkCLIConfigCurrent refuses removed keys and versions older than
// CurrentCLIConfigVersion, naming each key and its replacement.
func checkCLIConfigCurrent(name string, raw map[string]any) error {
	var found []string
	for _, k := range removedCLIKeys {
		if _, ok, _ := lookup(raw, k.key); ok {
			found = append(found, fmt.Sprintf("%s was removed (use %s)", k.key, k.replacement))
		}
	}
	if len(found) > 0 {
		return fmt.Errorf("%w: %s: %s; run `loopctl config migrate --config %s` (or move the settings there and set version: %q)", ErrConfigTooOld, name, strings.Join(found, "; "), name, CurrentCLIConfigVersion)
	}
	v, ok := raw["version"]
	if !ok || v == nil {
		return nil
	}
	s := scalarString(v)
	have, okV := parseVersion(s)
	if !okV {
		return fmt.Errorf("%w: %s: version %q is not a dotted version number such as %q", ErrInvalidConfig, name, s, CurrentCLIConfigVersion)
	}
	want, _ := parseVersion(CurrentCLIConfigVersion)
	if compareVersions(have, want) < 0 {
		return fmt.Errorf("%w: %s: version %q is older than %s; run `loopctl config migrate --config %s` (removed keys move to their replacements, the version is stamped %q)", ErrConfigTooOld, name, s, CurrentCLIConfigVersion, name, CurrentCLIConfigVersion)
	}
	return nil
}

// scalarString renders a YAML scalar as text ("0.5" for the number 0.5).
func scalarString(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case float64:
		return strconv.FormatFloat(t, 'f', -1, 64)
	case float32:
		return strconv.FormatFloat(float64(t), 'f', -1, 32)
	default:
		return fmt.Sprint(v)
	}
}

// ResolveSessionPerPr maps a configured routing.tmux.sessionPerPr value to
// a mode (docs/graph.md §5.1): null and true → cross-repository,
// false → never, a mode name → itself, anything else → cross-repository
// with a warning naming the key.
func ResolveSessionPerPr(v any) (mode, warning string) {
	switch t := v.(type) {
	case nil:
		return SessionPerPrCrossRepository, ""
	case bool:
		if t {
			return SessionPerPrCrossRepository, ""
		}
		return SessionPerPrNever, ""
	case string:
		switch t {
		case SessionPerPrNever, SessionPerPrCrossRepository, SessionPerPrAlways:
			return t, ""
		}
	}
	return SessionPerPrCrossRepository, fmt.Sprintf("routing.tmux.sessionPerPr: %q is not one of never, cross-repository, always (or true/false); using cross-repository", scalarString(v))
}

// topLevelBlocks returns the lines of a block-style YAML mapping that belong
// to the wanted top-level keys (each key line at column 0 and everything
// indented, blank or commented after it). It reports false for documents it
// cannot cut safely: a top-level line that is not a plain "key:" (flow
// style, sequences, complex keys, directives) or a second document.
func topLevelBlocks(data []byte, want map[string]bool) ([]byte, bool) {
	if len(data) > maxConfigBytes {
		return nil, false
	}
	var out []byte
	keep, seenKey := false, false
	for i, line := range strings.SplitAfter(string(data), "\n") {
		t := strings.TrimRight(line, "\r\n")
		if endsWithProperties(t) {
			// "key: !tag" or "- &anchor" with nothing after: the properties
			// may apply to what the next lines hold, which a cut would
			// separate (fuzz crasher "0: !0  \nticketing: 00").
			return nil, false
		}
		if t == "" || t[0] == ' ' || t[0] == '#' {
			if !seenKey && strings.TrimSpace(t) != "" && !strings.HasPrefix(strings.TrimSpace(t), "#") {
				return nil, false // content before the first key: not a plain mapping
			}
			if keep {
				out = append(out, line...)
			}
			continue
		}
		if t == "---" && i == 0 {
			continue
		}
		key, ok := plainTopKey(t)
		if !ok {
			return nil, false
		}
		keep, seenKey = want[key], true
		if keep {
			out = append(out, line...)
		}
	}
	return out, true
}

// endsWithProperties reports whether a line (comment aside) ends with a
// node property — a tag "!x" or an anchor "&x" — whose node may then be on
// the following lines.
func endsWithProperties(line string) bool {
	if i := strings.Index(line, " #"); i >= 0 {
		line = line[:i]
	}
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return false
	}
	last := fields[len(fields)-1]
	return last[0] == '!' || last[0] == '&'
}

// plainTopKey reads "key:" or "key: value" at column 0 for a plain key.
func plainTopKey(line string) (string, bool) {
	i := strings.IndexByte(line, ':')
	if i <= 0 || (i+1 < len(line) && line[i+1] != ' ') {
		return "", false
	}
	key := line[:i]
	for _, c := range key {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return "", false
		}
	}
	return key, true
}
