package loop

import (
	"bytes"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/goccy/go-yaml"

	"github.com/theloop-dev/theloop/internal/lazyre"
)

// MigrationChange is one thing MigrateCLIConfig did (or, on conflict, left
// alone).
type MigrationChange struct {
	// Kind is moved, removed, conflict or stamped.
	Kind string `json:"kind"`
	From string `json:"from,omitempty"`
	To   string `json:"to,omitempty"`
	Note string `json:"note,omitempty"`
}

func (c MigrationChange) String() string {
	switch c.Kind {
	case "moved":
		if c.Note != "" {
			return fmt.Sprintf("moved %s → %s (%s)", c.From, c.To, c.Note)
		}
		return fmt.Sprintf("moved %s → %s", c.From, c.To)
	case "removed":
		return fmt.Sprintf("removed %s (%s)", c.From, c.Note)
	case "conflict":
		return fmt.Sprintf("kept %s; %s disagrees (%s) and was dropped", c.To, c.From, c.Note)
	case "stamped":
		return fmt.Sprintf("version %s", c.Note)
	}
	return c.Kind
}

// Migration is MigrateCLIConfig's result.
type Migration struct {
	// Output is the migrated file (equal to the input when nothing
	// changed).
	Output []byte `json:"-"`
	// Changes lists every moved, removed or conflicting key and the
	// version stamp, in a deterministic order.
	Changes []MigrationChange `json:"changes"`
	// CommentsKept reports that every comment of the input is in the
	// output, each beside the key it described (a removed key's comments
	// go with it). A stamp alone edits the version line in place; moved or
	// removed keys re-encode the file in its own key order, which keeps
	// the comments but not blank lines or flow style ([a, b]).
	CommentsKept bool `json:"commentsKept"`
}

// Changed reports whether the output differs from the input.
func (m Migration) Changed() bool { return len(m.Changes) > 0 }

var versionLine = lazyre.New(`(?m)^version:[^\n]*$`)

// RetiredCLIConfigKeys maps each key the CLI config once had, and that
// nothing reads any more, to what MigrateCLIConfig does with it: the key
// that replaces it, or "" when it is removed. CheckCLIConfigKeys refuses
// every one of them, naming the replacement and `loopctl config migrate`.
func RetiredCLIConfigKeys() map[string]string { return maps.Clone(retiredKeys) }

// retiredKeys: a key accepted and shown but never read is a lie to the
// operator (the shipped example's webhooks.ghWebhook.repositories dropped
// every event as repository-not-bound), so a retired key is refused at load
// and moved or removed by migrate.
var retiredKeys = map[string]string{
	"webhooks.ghWebhook.repositories": "repositories",
}

// removedKeyList (removedKeys by path) are keys the catalogue once accepted (and showed as in
// effect) that nothing reads, with why (issue 21): loading refuses each,
// naming the nearest valid key and `loopctl config migrate`, which removes
// it and says so.
var removedKeyList = []struct{ path, why string }{
	{"webhooks.ghWebhook.pidfile", "loopd locks <state root>/loopd.lock"},
	{"polling.sources[].ghBinary", "the poller talks to GitHub through integrations.github"},
	{"routing.registryDir", "session records live under the state root"},
	{"routing.runner", "tmux is the only runner"},
	{"routing.workspace.strategy", "worktree is the only strategy"},
	{"routing.workspace.cloneProtocol", "loopd works in worktrees of existing checkouts and clones nothing"},
	{"routing.workspace.defaultHost", "loopd works in worktrees of existing checkouts and clones nothing"},
	{"routing.workspace.gitBinary", "git is found on PATH"},
	{"routing.harnessPlugins.marketplaceRepo", "the plugin is written from loopd's own copy into a local marketplace"},
	{"service.host", "see service.listen"},
	{"service.port", "see service.listen"},
	{"service.exposed", "TCP always needs the token"},
	{"service.autoStart", "loopd runs under systemd"},
	{"service.hostIngresses", "loopd always hosts its ingresses"},
	{"channels.slack.authorizedUsers", "channels.slack.users maps Slack ids to GitHub logins, authorized by routing.authorizedUsers"},
	{"channels.slack.events", "the Slack thread opens at spawn; notifications go through integrations.slack"},
	{"channels.slack.verbosity", "the Slack thread opens at spawn; notifications go through integrations.slack"},
	{"channels.slack.read", "see channels.slack.mode (events or socket)"},
	{"standingSessions", "theloop has no standing sessions; sessions belong to work items"},
	{"selfDiagnosis", "theloop does not run a self-diagnosis agent"},
}

var removedKeys = func() map[string]string {
	m := map[string]string{}
	for _, k := range removedKeyList {
		m[k.path] = k.why
	}
	return m
}()

// RemovedCLIConfigKeys maps each key `loopctl config migrate` removes
// because nothing reads it to the reason.
func RemovedCLIConfigKeys() map[string]string { return maps.Clone(removedKeys) }

// MigrateCLIConfig rewrites an old CLI config into the current shape
// (docs/daemon.md §12.1): webhooks.ghWebhook.routing.* moves to the
// top-level routing (which wins key by key; each disagreement is reported),
// routing.{control,reactions,announce}.ghBinary moves to
// integrations.github.cli.binary, webhooks.ghWebhook.repositories joins the
// top-level repositories, polling.stateFile, service.cors and every
// catalogued key documented as ignored or removed are deleted, and the
// version is stamped. Key order and comments are kept. It is deterministic
// and idempotent: migrating its output changes nothing. It never panics.
func MigrateCLIConfig(name string, data []byte) (mig Migration, err error) {
	raw, err := decodeYAMLMap(name, data) // bounds and shape, before anything else
	if err != nil {
		return Migration{}, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	defer func() {
		if r := recover(); r != nil {
			mig, err = Migration{}, fmt.Errorf("%w: %s: the YAML library failed on this file (%v); migrate it by hand (see `loopctl config schema`)", ErrInvalidConfig, name, r)
		}
	}()
	doc, cm, err := decodeOrdered(data)
	if err != nil {
		return Migration{}, fmt.Errorf("%w: %s: %v", ErrInvalidConfig, name, err)
	}
	m := &migrating{t: &migrationTree{root: doc, comments: cm}}
	oldLast := ""
	if n := len(doc.keys); n > 0 {
		oldLast = doc.keys[n-1]
	}
	m.nestedRouting()
	m.ghBinaries()
	m.retiredKeys()
	m.removedKeys()
	stamp := m.needsStamp(raw)
	if stamp {
		m.ch = append(m.ch, MigrationChange{Kind: "stamped", To: "version", Note: CurrentCLIConfigVersion})
	}
	out := Migration{Output: data, Changes: m.ch, CommentsKept: true}
	if !m.moved && !stamp {
		return out, nil
	}
	if !m.moved {
		// Only the version: edit the text in place, keeping it all.
		if b := stampVersionLine(data); migratedRoundTrips(name, b) {
			out.Output = b
			return out, nil
		}
	}
	b, err := m.encode(name, oldLast)
	if err != nil {
		return Migration{}, err
	}
	out.Output = b
	return out, nil
}

// migrating is one MigrateCLIConfig run: the tree being rewritten, the
// changes so far, and whether any key moved or went (which re-encodes the
// file). Each step below is one rule of the migration.
type migrating struct {
	t     *migrationTree
	ch    []MigrationChange
	moved bool
}

func (m *migrating) change(c MigrationChange) { m.ch = append(m.ch, c) }

// nestedRouting moves webhooks.ghWebhook.routing to the top-level routing
// (which wins key by key; each disagreement is reported).
func (m *migrating) nestedRouting() {
	t := m.t
	wh, old, ok := t.lookup("webhooks.ghWebhook", "routing")
	if !ok {
		return
	}
	m.moved = true
	if om, ok := old.(*omap); ok {
		top := t.ensure("routing")
		if top == nil {
			m.change(MigrationChange{Kind: "conflict", From: "webhooks.ghWebhook.routing", To: "routing", Note: "a non-mapping value is in the way"})
		} else {
			t.merge(top, om, "routing", "webhooks.ghWebhook.routing", &m.ch)
		}
	} else {
		m.change(MigrationChange{Kind: "removed", From: "webhooks.ghWebhook.routing", Note: "not a mapping"})
	}
	t.remove(wh, "webhooks.ghWebhook", "routing")
}

// ghBinaries moves routing.{control,reactions,announce}.ghBinary to
// integrations.github.cli.binary.
func (m *migrating) ghBinaries() {
	t := m.t
	for _, sec := range []string{"announce", "control", "reactions"} {
		sm, v, ok := t.lookup("routing."+sec, "ghBinary")
		if !ok {
			continue
		}
		m.moved = true
		from, to := "routing."+sec+".ghBinary", "integrations.github.cli.binary"
		cli := t.ensure("integrations", "github", "cli")
		switch cur, has := cli.get("binary"); {
		case cli == nil:
			m.change(MigrationChange{Kind: "conflict", From: from, To: to, Note: "a non-mapping value is in the way"})
			t.remove(sm, "routing."+sec, "ghBinary")
		case has && !reflect.DeepEqual(cur, v):
			m.change(MigrationChange{Kind: "conflict", From: from, To: to, Note: fmt.Sprintf("%v vs %v", v, cur)})
			t.remove(sm, "routing."+sec, "ghBinary")
		default:
			cli.set("binary", v)
			t.move(sm, "routing."+sec, "ghBinary", to)
			m.change(MigrationChange{Kind: "moved", From: from, To: to})
		}
	}
}

// retiredKeys moves each retired key to its replacement
// (webhooks.ghWebhook.repositories joins repositories: the union).
func (m *migrating) retiredKeys() {
	t := m.t
	for _, from := range slices.Sorted(maps.Keys(retiredKeys)) {
		to := retiredKeys[from]
		parent, leaf := splitPath(from)
		pm, v, ok := t.lookup(parent, leaf)
		if !ok {
			continue
		}
		m.moved = true
		cur, has := t.root.get(to)
		if !has || cur == nil {
			t.root.insertBefore(strings.SplitN(from, ".", 2)[0], to, v)
			t.move(pm, parent, leaf, to)
			m.change(MigrationChange{Kind: "moved", From: from, To: to})
			continue
		}
		merged, added, ok := unionStrings(cur, v)
		if !ok {
			m.change(MigrationChange{Kind: "conflict", From: from, To: to, Note: "not both lists of strings"})
		} else {
			t.root.set(to, merged)
			note := "merged into " + to
			if len(added) > 0 {
				note += ", adding " + strings.Join(added, ", ")
			}
			m.change(MigrationChange{Kind: "moved", From: from, To: to, Note: note})
		}
		t.remove(pm, parent, leaf)
	}
}

// removedKeys deletes the keys no reader has: polling.stateFile,
// service.cors and removedKeyList (in catalogue order).
func (m *migrating) removedKeys() {
	removals := []struct{ path, note string }{
		{"polling.stateFile", "the poll ledger lives under state.root"},
		{"service.cors", "the control plane sends no CORS headers"},
	}
	for _, k := range removedKeyList { // catalogue order
		removals = append(removals, struct{ path, note string }{k.path, "nothing reads it: " + k.why})
	}
	for _, r := range removals {
		if m.remove(r.path) {
			m.moved = true
			m.change(MigrationChange{Kind: "removed", From: r.path, Note: r.note})
		}
	}
}

// remove deletes path (a list's items' key when path has "[]") and
// reports whether it was there.
func (m *migrating) remove(path string) bool {
	t := m.t
	parent, leaf := splitPath(path)
	if list, item, ok := strings.Cut(parent, "[]"); ok && item == "" {
		lp, ll := splitPath(list)
		lm, _ := t.mapAt(lp)
		items, _ := lm.get(ll)
		l, _ := items.([]any)
		found := false
		for _, it := range l {
			if im, ok := it.(*omap); ok {
				if _, ok := im.get(leaf); ok {
					im.del(leaf)
					found = true
				}
			}
		}
		return found
	}
	if pm, ok := t.mapAt(parent); ok {
		if _, ok := pm.get(leaf); ok {
			t.remove(pm, parent, leaf)
			return true
		}
	}
	return false
}

// needsStamp reports whether the version is to be stamped: it is older
// than the current one (or absent), unless the file is empty and nothing
// moved (an empty file stays empty).
func (m *migrating) needsStamp(raw map[string]any) bool {
	stamp := true
	if v, ok := raw["version"]; ok && v != nil {
		if have, ok := parseVersion(scalarString(v)); ok {
			want, _ := parseVersion(CurrentCLIConfigVersion)
			stamp = compareVersions(have, want) < 0
		}
	}
	if len(raw) == 0 && !m.moved {
		stamp = false
	}
	return stamp
}

// stampVersionLine is data with its version line set to the current
// version (added first when there is none), the rest of the text as it was.
func stampVersionLine(data []byte) []byte {
	line := fmt.Sprintf("version: %q", CurrentCLIConfigVersion)
	var b []byte
	if versionLine.RE().Match(data) {
		b = versionLine.RE().ReplaceAll(data, []byte(line))
	} else {
		b = append([]byte(line+"\n"), data...)
	}
	return withNewline(b)
}

// migratedRoundTrips reports whether b loads and says the current version.
func migratedRoundTrips(name string, b []byte) bool {
	chk, err := decodeYAMLMap(name, b)
	return err == nil && scalarString(chk["version"]) == CurrentCLIConfigVersion
}

// encode stamps the version in the tree and re-encodes it in its own key
// order with its comments; the result must load again.
func (m *migrating) encode(name, oldLast string) ([]byte, error) {
	t := m.t
	if _, ok := t.root.get("version"); ok {
		t.root.set("version", CurrentCLIConfigVersion)
	} else {
		t.root.insertBefore("", "version", CurrentCLIConfigVersion)
	}
	t.keepFootLast(oldLast)
	b, err := yaml.MarshalWithOptions(t.root.slice(), yaml.Indent(2), yaml.IndentSequence(true), yaml.WithComment(t.comments))
	if err != nil {
		return nil, fmt.Errorf("%s: encoding the migrated config: %w", name, err)
	}
	b = withNewline(b)
	if !migratedRoundTrips(name, b) {
		return nil, fmt.Errorf("%w: %s: the migrated config would not load again; migrate it by hand (see `loopctl config schema`)", ErrInvalidConfig, name)
	}
	return b, nil
}

func splitPath(p string) (parent, leaf string) {
	i := strings.LastIndexByte(p, '.')
	if i < 0 {
		return "", p
	}
	return p[:i], p[i+1:]
}

// unionStrings is a's strings followed by those of b that a lacks (case
// folded, as the repository bound compares); false unless both are lists
// of strings.
func unionStrings(a, b any) (merged []any, added []string, ok bool) {
	al, aok := a.([]any)
	bl, bok := b.([]any)
	if !aok || !bok {
		return nil, nil, false
	}
	seen := map[string]bool{}
	for _, v := range al {
		s, ok := v.(string)
		if !ok {
			return nil, nil, false
		}
		seen[strings.ToLower(s)] = true
	}
	merged = slices.Clone(al)
	for _, v := range bl {
		s, ok := v.(string)
		if !ok {
			return nil, nil, false
		}
		if !seen[strings.ToLower(s)] {
			seen[strings.ToLower(s)] = true
			merged = append(merged, s)
			added = append(added, s)
		}
	}
	return merged, added, true
}

// omap is a YAML mapping that keeps its keys' order, so a migrated file
// reads in the order its operator wrote it.
type omap struct {
	keys []string
	vals map[string]any
}

func (m *omap) get(k string) (any, bool) {
	if m == nil {
		return nil, false
	}
	v, ok := m.vals[k]
	return v, ok
}

// set replaces k's value in place, or appends k.
func (m *omap) set(k string, v any) {
	if _, ok := m.vals[k]; !ok {
		m.keys = append(m.keys, k)
	}
	m.vals[k] = v
}

// insertBefore adds k before the key before ("" or absent: first), or
// replaces its value where k exists.
func (m *omap) insertBefore(before, k string, v any) {
	if _, ok := m.vals[k]; ok {
		m.vals[k] = v
		return
	}
	i := slices.Index(m.keys, before)
	if i < 0 {
		i = 0
	}
	m.keys = slices.Insert(m.keys, i, k)
	m.vals[k] = v
}

func (m *omap) del(k string) {
	delete(m.vals, k)
	m.keys = slices.DeleteFunc(m.keys, func(e string) bool { return e == k })
}

// slice is m for the encoder, nested mappings included.
func (m *omap) slice() yaml.MapSlice {
	out := make(yaml.MapSlice, 0, len(m.keys))
	for _, k := range m.keys {
		out = append(out, yaml.MapItem{Key: k, Value: toSlice(m.vals[k])})
	}
	return out
}

func toSlice(v any) any {
	switch t := v.(type) {
	case *omap:
		return t.slice()
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = toSlice(e)
		}
		return out
	}
	return v
}

// decodeOrdered decodes a mapping document into an omap tree and the
// comments beside its keys (goccy/go-yaml's comment map, keyed by path).
func decodeOrdered(data []byte) (*omap, yaml.CommentMap, error) {
	cm := yaml.CommentMap{}
	var ms yaml.MapSlice
	if err := yaml.UnmarshalWithOptions(data, &ms, yaml.UseOrderedMap(), yaml.CommentToMap(cm)); err != nil {
		return nil, nil, fmt.Errorf("not valid YAML: %s", yaml.FormatError(err, false, true))
	}
	m, ok := fromSlice(ms).(*omap)
	if !ok {
		return nil, nil, fmt.Errorf("the file must be a YAML mapping of keys")
	}
	return m, cm, nil
}

func fromSlice(v any) any {
	switch t := v.(type) {
	case yaml.MapSlice:
		m := &omap{vals: map[string]any{}}
		for _, it := range t {
			k := fmt.Sprint(it.Key)
			if _, dup := m.vals[k]; dup {
				continue
			}
			m.keys = append(m.keys, k)
			m.vals[k] = fromSlice(it.Value)
		}
		return m
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = fromSlice(e)
		}
		return out
	}
	return v
}

// migrationTree is the document being migrated and its comments, which
// move and go with the keys they describe.
type migrationTree struct {
	root     *omap
	comments yaml.CommentMap
}

// lookup finds leaf in the mapping at parent: the mapping, the value, and
// whether both are there.
func (t *migrationTree) lookup(parent, leaf string) (*omap, any, bool) {
	m, ok := t.mapAt(parent)
	if !ok {
		return nil, nil, false
	}
	v, ok := m.get(leaf)
	return m, v, ok
}

func (t *migrationTree) mapAt(path string) (*omap, bool) {
	cur := t.root
	if path == "" {
		return cur, true
	}
	for _, p := range strings.Split(path, ".") {
		v, _ := cur.get(p)
		next, ok := v.(*omap)
		if !ok {
			return nil, false
		}
		cur = next
	}
	return cur, true
}

// ensure returns the mapping at path, creating missing levels; nil when a
// value that is not a mapping is in the way (it is left alone).
func (t *migrationTree) ensure(path ...string) *omap {
	cur := t.root
	for _, p := range path {
		v, exists := cur.get(p)
		next, ok := v.(*omap)
		if !ok {
			if exists && v != nil {
				return nil
			}
			next = &omap{vals: map[string]any{}}
			cur.set(p, next)
		}
		cur = next
	}
	return cur
}

// commentPath is the comment map's key of a dotted path.
func commentPath(p string) string { return "$." + p }

// remove deletes parent's key and the comments on it and under it.
func (t *migrationTree) remove(parent *omap, parentPath, key string) {
	parent.del(key)
	t.moveComments(joinPath(parentPath, key), "")
	t.prune(parent, parentPath)
}

// move deletes parent's key (its value was put at to) and moves its
// comments to to.
func (t *migrationTree) move(parent *omap, parentPath, key, to string) {
	parent.del(key)
	t.moveComments(joinPath(parentPath, key), to)
	t.prune(parent, parentPath)
}

// prune removes a mapping the migration emptied (routing.control after its
// ghBinary moved), and so on up; the root stays.
func (t *migrationTree) prune(m *omap, path string) {
	for path != "" && len(m.keys) == 0 {
		parentPath, leaf := splitPath(path)
		parent, ok := t.mapAt(parentPath)
		if !ok {
			return
		}
		parent.del(leaf)
		t.moveComments(path, "")
		m, path = parent, parentPath
	}
}

// keepFootLast moves the comments below the document's last key (a closing
// remark) to whatever key is last after the migration, so they stay at the
// end of the file.
func (t *migrationTree) keepFootLast(oldLast string) {
	if oldLast == "" || len(t.root.keys) == 0 {
		return
	}
	newLast := t.root.keys[len(t.root.keys)-1]
	if newLast == oldLast {
		return
	}
	from, to := commentPath(oldLast), commentPath(newLast)
	var keep, foot []*yaml.Comment
	for _, c := range t.comments[from] {
		if c.Position == yaml.CommentFootPosition {
			foot = append(foot, c)
		} else {
			keep = append(keep, c)
		}
	}
	if len(foot) == 0 {
		return
	}
	if len(keep) > 0 {
		t.comments[from] = keep
	} else {
		delete(t.comments, from)
	}
	t.comments[to] = append(t.comments[to], foot...)
}

// moveComments moves the comments on from and under it to the same place
// under to, or drops them when to is "".
func (t *migrationTree) moveComments(from, to string) {
	f := commentPath(from)
	for _, k := range slices.Sorted(maps.Keys(t.comments)) {
		if k != f && !strings.HasPrefix(k, f+".") && !strings.HasPrefix(k, f+"[") {
			continue
		}
		c := t.comments[k]
		delete(t.comments, k)
		if to != "" {
			t.comments[commentPath(to)+k[len(f):]] = c
		}
	}
}

func joinPath(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

// merge copies src's keys into dst where dst has none (with their
// comments); where both have a mapping it recurses; where both have
// different values dst wins and the disagreement is reported.
func (t *migrationTree) merge(dst, src *omap, dstPath, srcPath string, ch *[]MigrationChange) {
	for _, k := range slices.Sorted(maps.Keys(src.vals)) {
		sv := src.vals[k]
		dp, sp := dstPath+"."+k, srcPath+"."+k
		dv, ok := dst.get(k)
		switch {
		case !ok:
			dst.set(k, sv)
			t.moveComments(sp, dp)
			*ch = append(*ch, MigrationChange{Kind: "moved", From: sp, To: dp})
		case isOmap(dv) && isOmap(sv):
			t.merge(dv.(*omap), sv.(*omap), dp, sp, ch)
		case reflect.DeepEqual(dv, sv):
			*ch = append(*ch, MigrationChange{Kind: "removed", From: sp, Note: "same as " + dp})
		default:
			*ch = append(*ch, MigrationChange{Kind: "conflict", From: sp, To: dp, Note: fmt.Sprintf("%v vs %v", plain(sv), plain(dv))})
		}
	}
}

func isOmap(v any) bool { _, ok := v.(*omap); return ok }

// plain is v with ordered mappings as plain maps, for messages.
func plain(v any) any {
	switch t := v.(type) {
	case *omap:
		m := make(map[string]any, len(t.keys))
		for _, k := range t.keys {
			m[k] = plain(t.vals[k])
		}
		return m
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = plain(e)
		}
		return out
	}
	return v
}

func withNewline(b []byte) []byte {
	if len(b) > 0 && !bytes.HasSuffix(b, []byte("\n")) {
		return append(b, '\n')
	}
	return b
}
