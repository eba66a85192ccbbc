package graphfile

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// The graph schema is checked by the small validator below, not by a
// general JSON Schema library: graph.schema.json uses a dozen draft-07
// keywords, and a general validator's package initialisation (format
// regexps, meta-schemas) was paid by every loopctl process — the agent's
// claims, CI's checks — whether or not it read a graph file.
//
// The validator knows exactly the keywords listed in schemaKeywords and
// refuses a schema that uses any other, so the schema cannot grow a rule
// that is silently not enforced (TestEmbeddedSchemaUsesOnlyKnownKeywords
// compiles the embedded one).

// schemaKeywords are the draft-07 keywords the validator enforces, plus the
// annotations it reads past.
var schemaKeywords = map[string]bool{
	"type": true, "properties": true, "additionalProperties": true, "required": true,
	"items": true, "minItems": true, "oneOf": true, "enum": true, "$ref": true,
	"minLength": true, "pattern": true, "minimum": true, "definitions": true,
	// annotations
	"$schema": true, "$id": true, "title": true, "description": true, "default": true, "examples": true, "$comment": true,
}

// schemaNode is one compiled (sub)schema.
type schemaNode struct {
	types      []string // empty: any type
	props      map[string]*schemaNode
	propOrder  []string // sorted, for a stable order of problems
	additional *schemaNode
	closed     bool // additionalProperties: false
	required   []string
	items      *schemaNode
	minItems   int
	oneOf      []*schemaNode
	enum       []any
	minLength  int
	pattern    *regexp.Regexp
	minimum    *float64
	ref        string
	resolved   *schemaNode
}

// violation is one schema rule broken at a path ("nodes[3].exit[0]", ""
// for the document).
type violation struct {
	path     string
	kind     violationKind
	property string // unknownKey, missingKey
	expected []string
	given    string
	allowed  []any
	limit    float64
}

type violationKind int

const (
	unknownKey violationKind = iota
	missingKey
	wrongType
	notInEnum
	noAlternative // oneOf: no branch (or more than one) matched
	tooFewItems
	tooShort
	noMatch // pattern
	tooSmall
)

var (
	schemaOnce sync.Once
	schemaRoot *schemaNode
	schemaErr  error
)

// compiledSchema compiles the validation schema on first use.
func compiledSchema() (*schemaNode, error) {
	schemaOnce.Do(func() {
		var root map[string]any
		if root, schemaErr = validationSchema(); schemaErr == nil {
			schemaRoot, schemaErr = compileSchema(root)
		}
	})
	return schemaRoot, schemaErr
}

// compileSchema turns a decoded JSON Schema into schemaNodes, resolving
// local references ("#/definitions/<name>").
func compileSchema(root map[string]any) (*schemaNode, error) {
	defs := map[string]*schemaNode{}
	var refs []*schemaNode
	var compile func(v any, at string) (*schemaNode, error)
	compile = func(v any, at string) (*schemaNode, error) {
		m, ok := v.(map[string]any)
		if !ok {
			if b, isBool := v.(bool); isBool && b {
				return &schemaNode{}, nil
			}
			return nil, fmt.Errorf("%s: a schema must be an object", at)
		}
		n := &schemaNode{}
		for k, val := range m {
			if !schemaKeywords[k] {
				return nil, fmt.Errorf("%s: keyword %q is not supported by theloop's graph-schema validator (supported: %s)", at, k, strings.Join(sortedKeys(schemaKeywords), ", "))
			}
			var err error
			switch k {
			case "type":
				n.types, err = stringOrStrings(val)
			case "properties":
				pm, ok := val.(map[string]any)
				if !ok {
					return nil, fmt.Errorf("%s.properties must be an object", at)
				}
				n.props = map[string]*schemaNode{}
				for name, sub := range pm {
					if n.props[name], err = compile(sub, at+".properties."+name); err != nil {
						return nil, err
					}
					n.propOrder = append(n.propOrder, name)
				}
				sort.Strings(n.propOrder)
			case "additionalProperties":
				if b, isBool := val.(bool); isBool {
					n.closed = !b
				} else {
					n.additional, err = compile(val, at+".additionalProperties")
				}
			case "required":
				n.required, err = stringOrStrings(val)
			case "items":
				n.items, err = compile(val, at+".items")
			case "minItems":
				n.minItems, err = wholeNumber(val)
			case "minLength":
				n.minLength, err = wholeNumber(val)
			case "minimum":
				f, ok := val.(float64)
				if !ok {
					return nil, fmt.Errorf("%s.minimum must be a number", at)
				}
				n.minimum = &f
			case "pattern":
				s, ok := val.(string)
				if !ok {
					return nil, fmt.Errorf("%s.pattern must be a string", at)
				}
				n.pattern, err = regexp.Compile(s)
			case "enum":
				list, ok := val.([]any)
				if !ok {
					return nil, fmt.Errorf("%s.enum must be an array", at)
				}
				n.enum = list
			case "oneOf":
				list, ok := val.([]any)
				if !ok || len(list) == 0 {
					return nil, fmt.Errorf("%s.oneOf must be a non-empty array", at)
				}
				for i, sub := range list {
					c, err := compile(sub, fmt.Sprintf("%s.oneOf[%d]", at, i))
					if err != nil {
						return nil, err
					}
					n.oneOf = append(n.oneOf, c)
				}
			case "$ref":
				s, ok := val.(string)
				if !ok || !strings.HasPrefix(s, "#/definitions/") {
					return nil, fmt.Errorf("%s.$ref: only local references #/definitions/<name> are supported, not %v", at, val)
				}
				n.ref = strings.TrimPrefix(s, "#/definitions/")
				refs = append(refs, n)
			case "definitions":
				if at != "#" {
					return nil, fmt.Errorf("%s: definitions belong at the schema's root", at)
				}
			}
			if err != nil {
				return nil, fmt.Errorf("%s.%s: %w", at, k, err)
			}
		}
		return n, nil
	}
	if dm, ok := root["definitions"].(map[string]any); ok {
		for name, sub := range dm {
			c, err := compile(sub, "#/definitions/"+name)
			if err != nil {
				return nil, err
			}
			defs[name] = c
		}
	}
	top, err := compile(root, "#")
	if err != nil {
		return nil, err
	}
	for _, r := range refs {
		if r.resolved = defs[r.ref]; r.resolved == nil {
			return nil, fmt.Errorf("$ref #/definitions/%s: no such definition", r.ref)
		}
	}
	return top, nil
}

func stringOrStrings(v any) ([]string, error) {
	switch t := v.(type) {
	case string:
		return []string{t}, nil
	case []any:
		out := make([]string, 0, len(t))
		for _, e := range t {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("want strings, found %v", e)
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, fmt.Errorf("want a string or an array of strings, found %v", v)
}

func wholeNumber(v any) (int, error) {
	f, ok := v.(float64)
	if !ok || f < 0 || f != math.Trunc(f) {
		return 0, fmt.Errorf("want a non-negative integer, found %v", v)
	}
	return int(f), nil
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// jsonType names v's JSON type; integral numbers are "integer", as JSON
// Schema counts them.
func jsonType(v any) string {
	switch t := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	case float64:
		if t == math.Trunc(t) && !math.IsInf(t, 0) {
			return "integer"
		}
		return "number"
	case float32:
		return jsonType(float64(t))
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return "integer"
	}
	return fmt.Sprintf("%T", v)
}

func asFloat(v any) (float64, bool) {
	switch t := v.(type) {
	case float64:
		return t, true
	case float32:
		return float64(t), true
	case int:
		return float64(t), true
	case int64:
		return float64(t), true
	case uint64:
		return float64(t), true
	case int32:
		return float64(t), true
	case uint32:
		return float64(t), true
	}
	return 0, false
}

func typeMatches(want, got string) bool {
	return want == got || (want == "number" && got == "integer")
}

// validate appends every rule of n that v breaks. It reports, like the
// draft-07 validators editors use, a wrong type and nothing else for that
// value; and for a oneOf that no branch matches, the oneOf itself plus the
// problems of the branch that came closest.
func (n *schemaNode) validate(v any, path string, out *[]violation) {
	if n.resolved != nil {
		n.resolved.validate(v, path, out)
		return
	}
	got := jsonType(v)
	if len(n.types) > 0 && !slices.ContainsFunc(n.types, func(w string) bool { return typeMatches(w, got) }) {
		*out = append(*out, violation{path: path, kind: wrongType, expected: n.types, given: got})
		return
	}
	if n.enum != nil && !slices.ContainsFunc(n.enum, func(e any) bool { return jsonEqual(e, v) }) {
		*out = append(*out, violation{path: path, kind: notInEnum, allowed: n.enum})
	}
	switch t := v.(type) {
	case map[string]any:
		for _, req := range n.required {
			if _, ok := t[req]; !ok {
				*out = append(*out, violation{path: path, kind: missingKey, property: req})
			}
		}
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			child := joinPath(path, k)
			if sub, ok := n.props[k]; ok {
				sub.validate(t[k], child, out)
				continue
			}
			switch {
			case n.additional != nil:
				n.additional.validate(t[k], child, out)
			case n.closed:
				*out = append(*out, violation{path: path, kind: unknownKey, property: k})
			}
		}
	case []any:
		if len(t) < n.minItems {
			*out = append(*out, violation{path: path, kind: tooFewItems, limit: float64(n.minItems)})
		}
		if n.items != nil {
			for i, e := range t {
				n.items.validate(e, path+"["+strconv.Itoa(i)+"]", out)
			}
		}
	case string:
		if n.minLength > 0 && len([]rune(t)) < n.minLength {
			*out = append(*out, violation{path: path, kind: tooShort, limit: float64(n.minLength)})
		}
		if n.pattern != nil && !n.pattern.MatchString(t) {
			*out = append(*out, violation{path: path, kind: noMatch})
		}
	default:
		if f, ok := asFloat(v); ok && n.minimum != nil && f < *n.minimum {
			*out = append(*out, violation{path: path, kind: tooSmall, limit: *n.minimum})
		}
	}
	if len(n.oneOf) > 0 {
		matched := 0
		var closest []violation
		closestScore := -1
		for _, branch := range n.oneOf {
			var got []violation
			branch.validate(v, path, &got)
			if len(got) == 0 {
				matched++
				continue
			}
			if s := closeness(got, path); s > closestScore {
				closest, closestScore = got, s
			}
		}
		if matched != 1 {
			*out = append(*out, violation{path: path, kind: noAlternative})
			if matched == 0 {
				*out = append(*out, closest...)
			}
		}
	}
}

// closeness ranks a failed oneOf branch: one that rejected the value's
// type outright is furthest; otherwise the fewer problems, the closer.
func closeness(vs []violation, path string) int {
	if len(vs) == 1 && vs[0].kind == wrongType && vs[0].path == path {
		return 0
	}
	return 1 << 20 / len(vs)
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// jsonEqual compares an enum member (decoded from the schema's JSON) with a
// value decoded from YAML.
func jsonEqual(a, b any) bool {
	fa, okA := asFloat(a)
	fb, okB := asFloat(b)
	if okA || okB {
		return okA && okB && fa == fb
	}
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && string(ja) == string(jb)
}
