package install

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/theloop-dev/theloop/harness"
	"github.com/theloop-dev/theloop/internal/atomicfile"
	"github.com/theloop-dev/theloop/plugin"
	"github.com/theloop-dev/theloop/run"
)

// Scopes loopctl install knows (the harnesses are package harness's).
const (
	scopeUser    = "user"
	scopeProject = "project"
	// gateBinary is the Stop hook's program name.
	gateBinary = "loop-gate"
)

// Options is one install or uninstall: what to install where, and the
// world it runs in.
type Options struct {
	IO      IOStreams
	Env     *Env
	Harness string
	Scope   string
	DryRun  bool
	// Command is the loop-gate program as the harness's shell should run it.
	// Unless CommandSet, an existing loop-gate entry keeps its program.
	Command    string
	CommandSet bool
	// Repo is the repository for project scope ("": the one holding the
	// working directory).
	Repo string
	// Runner runs the harness's CLI (claude) when it is on PATH (nil: the
	// real one).
	Runner run.Runner
}

// CheckFlags refuses (exit 2) what `loopctl VERB` cannot use: a harness
// or scope it does not know, a --command that is not one line (when
// command), --repo without --scope project.
func (o *Options) CheckFlags(verb string, command bool) error {
	if !harness.Known(o.Harness) {
		return failWith(exitRefused, "loopctl %s: --harness must be %s, not %q", verb, harness.List(harness.Names()), o.Harness)
	}
	switch o.Scope {
	case scopeUser, scopeProject:
	default:
		return failWith(exitRefused, "loopctl %s: --scope must be user or project, not %q", verb, o.Scope)
	}
	if command && (strings.TrimSpace(o.Command) == "" || strings.ContainsAny(o.Command, "\x00\r\n")) {
		return failWith(exitRefused, "loopctl %s: --command must name the loop-gate program on one line, e.g. /usr/local/bin/loop-gate", verb)
	}
	if o.Repo != "" && o.Scope != scopeProject {
		return failWith(exitRefused, "loopctl %s: --repo only applies to --scope project", verb)
	}
	// The harness runs the hook from the agent's directory, not from here:
	// a relative program path (./bin/loop-gate) is made absolute now, and
	// said so, rather than written as given and broken later.
	if command && o.CommandSet && strings.Contains(o.Command, "/") && !filepath.IsAbs(o.Command) && o.Env != nil {
		wd, err := o.Env.Getwd()
		if err != nil {
			return failWith(exitRefused, "loopctl %s: --command %s is relative and the working directory is unknown: %v; give an absolute path", verb, o.Command, err)
		}
		abs := filepath.Join(wd, o.Command)
		fmt.Fprintf(o.IO.ErrOut, "note: --command %s is relative; writing %s (the harness runs hooks from the agent's directory)\n", o.Command, abs)
		o.Command = abs
	}
	return nil
}

// runInstallStopHook registers loop-gate in the harness's hook file
// (Cursor; Claude Code gets it from the plugin).
func runInstallStopHook(opts *Options) error {
	path, err := opts.settingsPath()
	if err != nil {
		return err
	}
	want, cmdErr := opts.wantCommand(path)
	old, err := os.ReadFile(path)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return failWith(exitFailed, "loopctl install: reading %s: %v", path, err)
	}
	updated, command, changes, err := installFlatHook(old, opts.desc().Gate.Event, want)
	if *cmdErr != nil {
		return *cmdErr
	}
	if err != nil {
		return failWith(exitFailed, "loopctl install: %s: %v; fix the file by hand (nothing was written)", path, err)
	}
	out := opts.IO.Out
	if len(changes) == 0 {
		fmt.Fprintf(out, "%s already runs %q as the %s Stop hook; nothing to do\n", path, command, harnessTitle(opts.Harness))
		return nil
	}
	if opts.DryRun {
		from := path
		if !exists {
			from = "/dev/null"
		}
		io.WriteString(out, unifiedDiff(from, path, old, updated))
		fmt.Fprintf(out, "dry run: %s not written\n", path)
		return nil
	}
	if err := writeFileAtomic(path, updated, opts.Scope == scopeUser); err != nil {
		return failWith(exitFailed, "loopctl install: writing %s: %v (the file is unchanged)", path, err)
	}
	for _, c := range changes {
		fmt.Fprintf(out, "%s: %s\n", path, c)
	}
	if command == hookCommand(gateBinary, opts.Harness) && !opts.onPath(gateBinary) {
		fmt.Fprintf(opts.IO.ErrOut, "warning: %s is not on PATH; install it (go install github.com/theloop-dev/theloop/cmd/loop-gate@latest) or run loopctl install --command /absolute/path/to/loop-gate\n", gateBinary)
	}
	return nil
}

// harnessTitle is how messages name the harness called h.
func harnessTitle(h string) string {
	if d := harness.ByName(h); d != nil {
		return d.Title
	}
	return harness.Default().Title
}

// desc is the harness the options name (CheckFlags made sure there is
// one; the default otherwise).
func (o *Options) desc() *harness.Descriptor {
	if d := harness.ByName(o.Harness); d != nil {
		return d
	}
	return harness.Default()
}

// wantCommand is the command line a hook entry should run, given the one
// an earlier install wrote ("" for none): at user scope the program asked
// for, else the existing entry's, else loop-gate; at project scope one that
// holds in a teammate's checkout (projectCommand), whose refusal lands in
// *err.
func (o *Options) wantCommand(settings string) (func(existing string) string, *error) {
	var cmdErr error
	return func(existing string) string {
		if o.Scope == scopeProject {
			c, err := o.projectCommand(repoRootOf(settings), existing)
			if err != nil && cmdErr == nil {
				cmdErr = err
			}
			return c
		}
		if existing != "" && !o.CommandSet {
			return plugin.WithCrashGuard(gateProgram(existing) + " " + o.Harness)
		}
		return hookCommand(o.Command, o.Harness)
	}, &cmdErr
}

// settingsPath is the file the harness reads its hooks from, for the scope.
func (o *Options) settingsPath() (string, error) {
	layout := o.desc().Install
	rel := filepath.FromSlash(layout.HookFile)
	// Codex keeps its user layer in $CODEX_HOME when that is set.
	if layout.HomeEnv != "" && o.Scope == scopeUser {
		if ch := o.Env.Getenv(layout.HomeEnv); filepath.IsAbs(ch) {
			return evalLink(filepath.Join(ch, filepath.Base(rel))), nil
		}
	}
	var base string
	if o.Scope == scopeUser {
		home, err := o.Env.HomeDir()
		if err != nil || home == "" {
			return "", failWith(exitFailed, "loopctl install: no home directory for --scope user (%v); set HOME or use --scope project", err)
		}
		base = home
	} else {
		start := o.Repo
		if start == "" {
			wd, err := o.Env.Getwd()
			if err != nil {
				return "", failWith(exitFailed, "loopctl install: %v", err)
			}
			start = wd
		}
		root, err := gitRoot(start)
		if err != nil {
			return "", err
		}
		base = root
	}
	return evalLink(filepath.Join(base, rel)), nil
}

// evalLink is path, or where it points when it is a symbolic link: a
// settings file managed as a link (dotfiles) is edited where it lives;
// replacing the link would silently fork the user's settings.
func evalLink(path string) string {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		return real
	}
	return path
}

// gitRoot walks up from dir to the directory holding .git.
func gitRoot(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", failWith(exitFailed, "loopctl install: %v", err)
	}
	for d := abs; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", failWith(exitFailed, "loopctl install: no git repository at or above %s; run it inside the repository or pass --repo", abs)
		}
	}
}

// onPath reports whether name is an executable file in a $PATH directory.
func (o *Options) onPath(name string) bool {
	for _, dir := range filepath.SplitList(o.Env.Getenv("PATH")) {
		if dir == "" {
			continue
		}
		if st, err := os.Stat(filepath.Join(dir, name)); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return true
		}
	}
	return false
}

// hookCommand is the shell command line the harness runs: the program,
// quoted for the shell when it needs to be, and the harness argument.
func hookCommand(program, harness string) string {
	return plugin.GateCommand(program, harness)
}

func shellQuote(s string) string {
	safe := true
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_./+:,@%=~-", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// gateProgram is a command line's program as written (quotes included).
func gateProgram(cmd string) string {
	cmd = strings.TrimSpace(cmd)
	if cmd != "" && (cmd[0] == '\'' || cmd[0] == '"') {
		if end := strings.IndexByte(cmd[1:], cmd[0]); end >= 0 {
			return cmd[:end+2]
		}
		return cmd
	}
	if i := strings.IndexAny(cmd, " \t"); i >= 0 {
		return cmd[:i]
	}
	return cmd
}

// isGateCommand reports whether a hook's command line runs loop-gate
// (whatever its path or arguments).
func isGateCommand(cmd string) bool {
	prog := strings.Trim(gateProgram(cmd), `'"`)
	base := prog[strings.LastIndexAny(prog, `/\`)+1:]
	return base == gateBinary || base == gateBinary+".exe"
}

// --- editing the harness's JSON ---------------------------------------------

// installFlatHook makes hooks.<event> of a flat hook file (Cursor's
// hooks.json) run command ({"version":1,"hooks":{"stop":[{"command":...}]}}),
// the same way.
func installFlatHook(old []byte, event string, want func(existing string) string) (updated []byte, command string, changes []string, err error) {
	root, err := parseObject(old, "the file")
	if err != nil {
		return nil, "", nil, err
	}
	if _, ok := root.vals["version"]; !ok {
		root.setFirst("version", mustJSON(1))
		changes = append(changes, `added "version": 1`)
	}
	before := len(changes)
	hooks, err := root.object("hooks", "hooks")
	if err != nil {
		return nil, "", nil, err
	}
	entries, err := hooks.array(event, "hooks."+event)
	if err != nil {
		return nil, "", nil, err
	}
	found := false
	var kept []any
	for _, e := range entries {
		entry, perr := parseObject(e.(json.RawMessage), "")
		cmd, ok := entry.str("command")
		if perr != nil || !ok || !isGateCommand(cmd) {
			kept = append(kept, e)
			continue
		}
		if found {
			changes = append(changes, fmt.Sprintf("removed a duplicate loop-gate %s hook (%q)", event, cmd))
			continue
		}
		found = true
		command = want(cmd)
		if cmd == command {
			kept = append(kept, e)
			continue
		}
		entry.set("command", mustJSON(command))
		kept = append(kept, entry)
		changes = append(changes, fmt.Sprintf("%s hook %q → %q", event, cmd, command))
	}
	if !found {
		command = want("")
		kept = append(kept, newObject("command", command))
		changes = append(changes, fmt.Sprintf("added the %s hook %q", event, command))
	}
	if len(changes) == 0 {
		return old, command, nil, nil
	}
	if len(changes) > before {
		hooks.set(event, kept)
		root.set("hooks", hooks)
	}
	return root.render(old), command, changes, nil
}

// object is a JSON object that keeps its keys' order, and the bytes of
// every value it did not have to change. A value is one of:
// json.RawMessage (kept verbatim, whitespace included), *object, or []any
// (an array of values).
type object struct {
	keys []string
	vals map[string]any
}

// newObject builds an object from key, value pairs; a string value becomes
// a JSON string.
func newObject(kv ...any) *object {
	o := &object{vals: map[string]any{}}
	for i := 0; i+1 < len(kv); i += 2 {
		v := kv[i+1]
		if s, ok := v.(string); ok {
			v = mustJSON(s)
		}
		o.set(kv[i].(string), v)
	}
	return o
}

// parseObject decodes a JSON object. Empty input (or only whitespace) is
// an empty object. what names the value in errors.
func parseObject(data []byte, what string) (*object, error) {
	o := &object{vals: map[string]any{}}
	if len(bytes.TrimSpace(data)) == 0 {
		return o, nil
	}
	if !json.Valid(data) {
		var v any
		err := json.Unmarshal(data, &v)
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line, col := lineCol(data, se.Offset)
			return nil, fmt.Errorf("%s is not valid JSON: line %d, column %d: %v", what, line, col, err)
		}
		return nil, fmt.Errorf("%s is not valid JSON: %v", what, err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("%s is %s, not a JSON object", what, jsonKind(data))
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		if _, dup := o.vals[key]; dup {
			return nil, fmt.Errorf("%s has the key %q twice; remove one", what, key)
		}
		o.keys = append(o.keys, key)
		o.vals[key] = raw
	}
	return o, nil
}

// lineCol turns a json.SyntaxError offset (the bytes read, the offending
// one included) into the 1-based line and column of the offending byte.
func lineCol(data []byte, offset int64) (line, col int) {
	if len(data) == 0 {
		return 1, 1
	}
	offset = min(max(offset, 1), int64(len(data)))
	before := data[:offset-1]
	line = bytes.Count(before, []byte("\n")) + 1
	col = len(before) - bytes.LastIndexByte(before, '\n')
	return line, col
}

func (o *object) str(key string) (string, bool) {
	if o == nil {
		return "", false
	}
	raw, ok := o.vals[key].(json.RawMessage)
	var s string
	if !ok || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

func isNull(v any) bool {
	raw, ok := v.(json.RawMessage)
	return ok && string(bytes.TrimSpace(raw)) == "null"
}

// object returns the object under key (a new empty one when absent or
// null).
func (o *object) object(key, where string) (*object, error) {
	v, ok := o.vals[key]
	if !ok || isNull(v) {
		return newObject(), nil
	}
	if obj, ok := v.(*object); ok {
		return obj, nil
	}
	return parseObject(v.(json.RawMessage), where)
}

// array returns the elements of the array under key (none when absent or
// null), each a json.RawMessage.
func (o *object) array(key, where string) ([]any, error) {
	v, ok := o.vals[key]
	if !ok || isNull(v) {
		return nil, nil
	}
	raw, _ := v.(json.RawMessage)
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, fmt.Errorf("%s is %s, not an array", where, jsonKind(raw))
	}
	out := make([]any, len(elems))
	for i, e := range elems {
		out[i] = e
	}
	return out, nil
}

func (o *object) set(key string, v any) {
	if _, ok := o.vals[key]; !ok {
		o.keys = append(o.keys, key)
	}
	o.vals[key] = v
}

func (o *object) setFirst(key string, v any) {
	if _, ok := o.vals[key]; !ok {
		o.keys = append([]string{key}, o.keys...)
	}
	o.vals[key] = v
}

// render is the file's new content. Values that were not changed are
// written back byte for byte; what changed is laid out with the file's own
// indentation unit (two spaces for a new or single-line file), so a file in
// the harness's usual format differs only where loopctl changed it.
func (o *object) render(original []byte) []byte {
	var b bytes.Buffer
	writeValue(&b, o, 0, indentUnit(original))
	b.WriteByte('\n')
	return b.Bytes()
}

func indentUnit(data []byte) string {
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		rest := data[i+1:]
		n := 0
		for n < len(rest) && (rest[n] == ' ' || rest[n] == '\t') {
			n++
		}
		if n > 0 {
			return string(rest[:n])
		}
	}
	return "  "
}

func writeValue(b *bytes.Buffer, v any, depth int, unit string) {
	switch v := v.(type) {
	case json.RawMessage:
		b.Write(bytes.TrimSpace(v))
	case *object:
		if len(v.keys) == 0 {
			b.WriteString("{}")
			return
		}
		b.WriteString("{\n")
		for i, k := range v.keys {
			b.WriteString(strings.Repeat(unit, depth+1))
			b.Write(mustJSON(k))
			b.WriteString(": ")
			writeValue(b, v.vals[k], depth+1, unit)
			if i < len(v.keys)-1 {
				b.WriteByte(',')
			}
			b.WriteByte('\n')
		}
		b.WriteString(strings.Repeat(unit, depth) + "}")
	case []any:
		if len(v) == 0 {
			b.WriteString("[]")
			return
		}
		b.WriteString("[\n")
		for i, e := range v {
			b.WriteString(strings.Repeat(unit, depth+1))
			writeValue(b, e, depth+1, unit)
			if i < len(v)-1 {
				b.WriteByte(',')
			}
			b.WriteByte('\n')
		}
		b.WriteString(strings.Repeat(unit, depth) + "]")
	}
}

func mustJSON(v any) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err) // strings and ints only
	}
	return bytes.TrimRight(b.Bytes(), "\n")
}

func jsonKind(v []byte) string {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return "empty"
	}
	switch v[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// --- writing -----------------------------------------------------------------

// writeFileAtomic replaces path with data (temp file + rename in the same
// directory), keeping an existing file's permissions; private creates
// missing directories 0700 (a home directory's), else 0755.
func writeFileAtomic(path string, data []byte, private bool) error {
	dir := filepath.Dir(path)
	dirMode := os.FileMode(0o755)
	if private {
		dirMode = 0o700
	}
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return err
	}
	mode := os.FileMode(0o644)
	if st, err := os.Stat(path); err == nil {
		mode = st.Mode().Perm()
	}
	return atomicfile.Write(path, data, mode)
}

// --- the dry run's diff ---------------------------------------------------------

// unifiedDiff renders the change from a to b as a unified diff with three
// lines of context.
func unifiedDiff(fromName, toName string, a, b []byte) string {
	x, y := splitLines(a), splitLines(b)
	ops := diffLines(x, y)
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", fromName, toName)
	const context = 3
	// Group the edit script into hunks.
	for i := 0; i < len(ops); {
		if ops[i].kind == ' ' {
			i++
			continue
		}
		start := max(0, i-context)
		end := i
		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++
				continue
			}
			run := end
			for run < len(ops) && ops[run].kind == ' ' {
				run++
			}
			if run == len(ops) || run-end > 2*context {
				end = min(len(ops), end+context)
				break
			}
			end = run
		}
		ax, ay := ops[start].ai, ops[start].bi
		var na, nb int
		for _, op := range ops[start:end] {
			if op.kind != '+' {
				na++
			}
			if op.kind != '-' {
				nb++
			}
		}
		fmt.Fprintf(&out, "@@ -%s +%s @@\n", hunkRange(ax, na), hunkRange(ay, nb))
		for _, op := range ops[start:end] {
			out.WriteByte(op.kind)
			out.WriteString(op.text)
			out.WriteByte('\n')
		}
		i = end
	}
	return out.String()
}

func hunkRange(start, n int) string {
	if n == 0 {
		return fmt.Sprintf("%d,0", start)
	}
	if n == 1 {
		return fmt.Sprintf("%d", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}

func splitLines(b []byte) []string {
	s := strings.TrimSuffix(string(b), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

type diffOp struct {
	kind   byte // ' ', '-', '+'
	text   string
	ai, bi int // positions in a and b before this line
}

// diffLines is a longest-common-subsequence line diff; settings files are
// small.
func diffLines(a, b []string) []diffOp {
	n, m := len(a), len(b)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var ops []diffOp
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && a[i] == b[j]:
			ops = append(ops, diffOp{' ', a[i], i, j})
			i++
			j++
		case i < n && (j == m || lcs[i+1][j] >= lcs[i][j+1]):
			ops = append(ops, diffOp{'-', a[i], i, j})
			i++
		default:
			ops = append(ops, diffOp{'+', b[j], i, j})
			j++
		}
	}
	return ops
}
