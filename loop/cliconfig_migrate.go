package loop

import (
	"bytes"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"github.com/goccy/go-yaml"
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
	// CommentsKept is false when keys had to move: the file is re-encoded
	// and its comments are lost (the YAML library keeps them only for
	// in-place edits, such as the version stamp alone).
	CommentsKept bool `json:"commentsKept"`
}

// Changed reports whether the output differs from the input.
func (m Migration) Changed() bool { return len(m.Changes) > 0 }

var versionLine = regexp.MustCompile(`(?m)^version:[^\n]*$`)

// MigrateCLIConfig rewrites an old CLI config into the current shape
// (reference daemon-spec §12.1): webhooks.ghWebhook.routing.* moves to the
// top-level routing (which wins key by key; each disagreement is reported),
// routing.{control,reactions,announce}.ghBinary moves to
// integrations.github.cli.binary, polling.stateFile and service.cors are
// removed, and the version is stamped. It is deterministic and idempotent:
// migrating its output changes nothing. It never panics.
func MigrateCLIConfig(name string, data []byte) (Migration, error) {
	raw, err := decodeYAMLMap(name, data)
	if err != nil {
		return Migration{}, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	var ch []MigrationChange
	moved := false

	// 1. webhooks.ghWebhook.routing → routing.
	if wh, ok := lookupMap(raw, "webhooks.ghWebhook"); ok {
		if old, ok := wh["routing"]; ok {
			delete(wh, "routing")
			moved = true
			if om, ok := old.(map[string]any); ok {
				top, _ := raw["routing"].(map[string]any)
				if top == nil {
					top = map[string]any{}
					raw["routing"] = top
				}
				mergeInto(top, om, "routing", "webhooks.ghWebhook.routing", &ch)
			} else {
				ch = append(ch, MigrationChange{Kind: "removed", From: "webhooks.ghWebhook.routing", Note: "not a mapping"})
			}
		}
	}
	// 2. routing.{control,reactions,announce}.ghBinary → integrations.github.cli.binary.
	for _, sec := range []string{"announce", "control", "reactions"} {
		m, ok := lookupMap(raw, "routing."+sec)
		if !ok {
			continue
		}
		v, ok := m["ghBinary"]
		if !ok {
			continue
		}
		delete(m, "ghBinary")
		moved = true
		from := "routing." + sec + ".ghBinary"
		cli, ok := ensureMap(raw, "integrations", "github", "cli")
		if !ok {
			ch = append(ch, MigrationChange{Kind: "conflict", From: from, To: "integrations.github.cli.binary", Note: "a non-mapping value is in the way"})
			continue
		}
		if cur, ok := cli["binary"]; ok && !reflect.DeepEqual(cur, v) {
			ch = append(ch, MigrationChange{Kind: "conflict", From: from, To: "integrations.github.cli.binary", Note: fmt.Sprintf("%v vs %v", v, cur)})
			continue
		}
		cli["binary"] = v
		ch = append(ch, MigrationChange{Kind: "moved", From: from, To: "integrations.github.cli.binary"})
	}
	// 3. Removed outright.
	for _, r := range []struct{ path, note string }{
		{"polling.stateFile", "the poll ledger lives under state.root"},
		{"service.cors", "the control plane sends no CORS headers"},
	} {
		parent, leaf := r.path[:strings.LastIndexByte(r.path, '.')], r.path[strings.LastIndexByte(r.path, '.')+1:]
		if m, ok := lookupMap(raw, parent); ok {
			if _, ok := m[leaf]; ok {
				delete(m, leaf)
				moved = true
				ch = append(ch, MigrationChange{Kind: "removed", From: r.path, Note: r.note})
			}
		}
	}
	// 4. The version.
	stamp := true
	if v, ok := raw["version"]; ok && v != nil {
		if have, ok := parseVersion(scalarString(v)); ok {
			want, _ := parseVersion(CurrentCLIConfigVersion)
			stamp = compareVersions(have, want) < 0
		}
	}
	if len(raw) == 0 && !moved {
		stamp = false // an empty file stays empty
	}
	if stamp {
		ch = append(ch, MigrationChange{Kind: "stamped", To: "version", Note: CurrentCLIConfigVersion})
	}
	out := Migration{Output: data, Changes: ch, CommentsKept: true}
	if !moved && !stamp {
		return out, nil
	}
	encode := func() ([]byte, error) {
		raw["version"] = CurrentCLIConfigVersion
		b, err := yaml.MarshalWithOptions(raw, yaml.Indent(2), yaml.IndentSequence(true))
		if err != nil {
			return nil, fmt.Errorf("%s: encoding the migrated config: %w", name, err)
		}
		return b, nil
	}
	// roundTrips: the output must load and say the current version.
	roundTrips := func(b []byte) bool {
		chk, err := decodeYAMLMap(name, b)
		return err == nil && scalarString(chk["version"]) == CurrentCLIConfigVersion
	}
	if !moved {
		// Only the version: edit the text in place, keeping comments.
		line := fmt.Sprintf("version: %q", CurrentCLIConfigVersion)
		var b []byte
		if versionLine.Match(data) {
			b = versionLine.ReplaceAll(data, []byte(line))
		} else {
			b = append([]byte(line+"\n"), data...)
		}
		b = withNewline(b)
		if roundTrips(b) {
			out.Output = b
			return out, nil
		}
	}
	b, err := encode()
	if err != nil {
		return Migration{}, err
	}
	b = withNewline(b)
	if !roundTrips(b) {
		return Migration{}, fmt.Errorf("%w: %s: the migrated config would not load again; migrate it by hand (see `loopctl config schema`)", ErrInvalidConfig, name)
	}
	out.Output, out.CommentsKept = b, false
	return out, nil
}

// mergeInto copies src's keys into dst where dst has none; where both have
// a mapping it recurses; where both have different values dst wins and the
// disagreement is reported.
func mergeInto(dst, src map[string]any, dstPath, srcPath string, ch *[]MigrationChange) {
	for _, k := range slices.Sorted(maps.Keys(src)) {
		sv := src[k]
		dp, sp := dstPath+"."+k, srcPath+"."+k
		dv, ok := dst[k]
		switch {
		case !ok:
			dst[k] = sv
			*ch = append(*ch, MigrationChange{Kind: "moved", From: sp, To: dp})
		case isMap(dv) && isMap(sv):
			mergeInto(dv.(map[string]any), sv.(map[string]any), dp, sp, ch)
		case reflect.DeepEqual(dv, sv):
			*ch = append(*ch, MigrationChange{Kind: "removed", From: sp, Note: "same as " + dp})
		default:
			*ch = append(*ch, MigrationChange{Kind: "conflict", From: sp, To: dp, Note: fmt.Sprintf("%v vs %v", sv, dv)})
		}
	}
}

func isMap(v any) bool { _, ok := v.(map[string]any); return ok }

func lookupMap(raw map[string]any, path string) (map[string]any, bool) {
	cur := raw
	for _, p := range strings.Split(path, ".") {
		next, ok := cur[p].(map[string]any)
		if !ok {
			return nil, false
		}
		cur = next
	}
	return cur, true
}

// ensureMap returns the mapping at path, creating missing levels; false
// when a value that is not a mapping is in the way (it is left alone).
func ensureMap(raw map[string]any, path ...string) (map[string]any, bool) {
	cur := raw
	for _, p := range path {
		v, exists := cur[p]
		next, ok := v.(map[string]any)
		if !ok {
			if exists && v != nil {
				return nil, false
			}
			next = map[string]any{}
			cur[p] = next
		}
		cur = next
	}
	return cur, true
}

func withNewline(b []byte) []byte {
	if len(b) > 0 && !bytes.HasSuffix(b, []byte("\n")) {
		return append(b, '\n')
	}
	return b
}
