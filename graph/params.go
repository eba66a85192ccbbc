package graph

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// ParamType is the type a hook parameter's `with:` value must have.
type ParamType string

// Parameter types. Compile checks every `with:` value against its declared
// type, so a misspelled or mistyped key fails when the graph loads instead
// of silently switching a check off.
const (
	// ParamString is a string.
	ParamString ParamType = "string"
	// ParamStrings is a string or a list of strings (Values.Strings reads
	// both).
	ParamStrings ParamType = "strings"
	// ParamBool is true or false.
	ParamBool ParamType = "bool"
	// ParamInt is a whole number.
	ParamInt ParamType = "int"
	// ParamDuration is a Go duration ("45s", "2m") or a positive number of
	// seconds.
	ParamDuration ParamType = "duration"
	// ParamMap is a mapping of keys to values.
	ParamMap ParamType = "map"
	// ParamAny accepts any value; the hook checks it itself.
	ParamAny ParamType = "any"
)

// Valid reports whether t is one of the declared parameter types.
func (t ParamType) Valid() bool {
	switch t {
	case ParamString, ParamStrings, ParamBool, ParamInt, ParamDuration, ParamMap, ParamAny:
		return true
	}
	return false
}

// describe is how a type is spelled in an error: what to write.
func (t ParamType) describe() string {
	switch t {
	case ParamString:
		return "a string"
	case ParamStrings:
		return "a string or a list of strings"
	case ParamBool:
		return "true or false"
	case ParamInt:
		return "a whole number"
	case ParamDuration:
		return "a duration such as 45s or 2m, or a number of seconds"
	case ParamMap:
		return "a mapping"
	}
	return "any value"
}

// Param declares one parameter a hook reads from its `with:` values.
type Param struct {
	// Name is the `with:` key, e.g. "sections".
	Name string `json:"name"`
	// Type is what the value must be.
	Type ParamType `json:"type"`
	// Required parameters must be present in every reference to the hook.
	Required bool `json:"required,omitempty"`
	// Summary is one line for `loopctl graph hooks` and the JSON Schema.
	Summary string `json:"summary,omitempty"`
}

// NoParams declares that a hook takes no parameters: any `with:` key is
// refused. (A HookSpec whose Params is nil has not declared its parameters
// and its `with:` values are passed through unchecked.)
var NoParams = []Param{}

// ParamsDeclared reports whether the hook declared its parameters (possibly
// none, with NoParams).
func (s HookSpec) ParamsDeclared() bool { return s.Params != nil }

// checkParamDecls panics on a malformed declaration: a programming error
// that must fail at registration.
func checkParamDecls(spec HookSpec) {
	seen := map[string]bool{}
	for _, p := range spec.Params {
		if p.Name == "" {
			panic(fmt.Sprintf("graph: hook %q declares a parameter with an empty name", spec.Name))
		}
		if seen[p.Name] {
			panic(fmt.Sprintf("graph: hook %q declares parameter %q twice", spec.Name, p.Name))
		}
		seen[p.Name] = true
		if !p.Type.Valid() {
			panic(fmt.Sprintf("graph: hook %q parameter %q has unknown type %q", spec.Name, p.Name, p.Type))
		}
	}
}

// paramNames lists the declared names, sorted, for error messages.
func paramNames(ps []Param) string {
	if len(ps) == 0 {
		return "(none: this hook takes no parameters)"
	}
	names := make([]string, 0, len(ps))
	for _, p := range ps {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// checkParams reports every unknown, mistyped and missing parameter of one
// hook reference.
func (c *compiler) checkParams(path, owner, hook string, decl []Param, with Values) {
	if decl == nil {
		return
	}
	byName := make(map[string]Param, len(decl))
	for _, p := range decl {
		byName[p.Name] = p
	}
	keys := make([]string, 0, len(with))
	for k := range with {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		p, ok := byName[k]
		if !ok {
			c.fail(path+".with."+k, "node '%s': hook '%s' has no parameter '%s'; valid parameters are: %s", owner, hook, k, paramNames(decl))
			continue
		}
		if !paramTypeOK(p.Type, with[k]) {
			c.fail(path+".with."+k, "node '%s': hook '%s' parameter '%s' must be %s, not %s", owner, hook, k, p.Type.describe(), kindOf(with[k]))
		}
	}
	for _, p := range decl {
		if _, ok := with[p.Name]; p.Required && !ok {
			c.fail(path+".with", "node '%s': hook '%s' needs parameter '%s' (%s); valid parameters are: %s", owner, hook, p.Name, p.Type.describe(), paramNames(decl))
		}
	}
}

func paramTypeOK(t ParamType, v any) bool {
	switch t {
	case ParamAny:
		return true
	case ParamString:
		_, ok := v.(string)
		return ok
	case ParamStrings:
		switch x := v.(type) {
		case string, []string:
			return true
		case []any:
			for _, e := range x {
				if _, ok := e.(string); !ok {
					return false
				}
			}
			return true
		}
		return false
	case ParamBool:
		_, ok := v.(bool)
		return ok
	case ParamInt:
		return isWhole(v)
	case ParamDuration:
		if s, ok := v.(string); ok {
			return (Values{"d": s}).Duration("d", 0) > 0
		}
		if isWhole(v) {
			return (Values{"d": v}).Int("d", 0) > 0
		}
		f, ok := v.(float64)
		return ok && f > 0 && !math.IsInf(f, 0) && f < float64(math.MaxInt64/int64(time.Second))
	case ParamMap:
		switch v.(type) {
		case map[string]any, Values:
			return true
		}
		return false
	}
	return false
}

func isWhole(v any) bool {
	switch n := v.(type) {
	case int, int64, uint64, int32, uint32:
		return true
	case float64:
		return n == math.Trunc(n) && !math.IsInf(n, 0)
	}
	return false
}

// kindOf names a value's kind without echoing it.
func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "empty"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case int, int64, uint64, int32, uint32, float64:
		return "a number"
	case []any, []string:
		return "a list"
	case map[string]any, Values:
		return "a mapping"
	}
	return fmt.Sprintf("a %T", v)
}
