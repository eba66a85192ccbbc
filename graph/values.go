package graph

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Values is a JSON/YAML-shaped map of settings or parameters, with typed
// accessors that never panic: a missing or mistyped value reads as the zero
// value (or the given default).
type Values map[string]any

// Has reports whether key is present with a non-nil value.
func (v Values) Has(key string) bool {
	x, ok := v[key]
	return ok && x != nil
}

// String returns v[key] as a string ("" when absent or not a string).
func (v Values) String(key string) string {
	s, _ := v[key].(string)
	return s
}

// StringOr returns v[key] as a string, or def when absent or empty.
func (v Values) StringOr(key, def string) string {
	if s := v.String(key); s != "" {
		return s
	}
	return def
}

// Bool returns v[key] when it is a bool.
func (v Values) Bool(key string) bool {
	b, _ := v[key].(bool)
	return b
}

// BoolPtr returns v[key] when it is a bool, nil otherwise (to tell "false"
// from "unset").
func (v Values) BoolPtr(key string) *bool {
	b, ok := v[key].(bool)
	if !ok {
		return nil
	}
	return &b
}

// Int returns v[key] as an int when it holds any integer type (or a float
// with no fractional part); def otherwise.
func (v Values) Int(key string, def int) int {
	switch n := v[key].(type) {
	case int:
		return n
	case int64:
		return int(n)
	case uint64:
		return int(n)
	case int32:
		return int(n)
	case uint32:
		return int(n)
	case float64:
		if n == float64(int(n)) {
			return int(n)
		}
	}
	return def
}

// Strings returns v[key] as a list of strings. A single string becomes a
// one-element list; non-string list members are rendered with fmt.
func (v Values) Strings(key string) []string {
	return AsStrings(v[key])
}

// Map returns v[key] as Values (nil when absent or not a mapping).
func (v Values) Map(key string) Values {
	return AsValues(v[key])
}

// Duration returns v[key] as a duration: a Go duration string ("45s") or a
// number of seconds. def when absent or invalid.
func (v Values) Duration(key string, def time.Duration) time.Duration {
	switch x := v[key].(type) {
	case string:
		if d, err := time.ParseDuration(strings.TrimSpace(x)); err == nil && d > 0 {
			return d
		}
		if n, err := strconv.ParseFloat(strings.TrimSpace(x), 64); err == nil && n > 0 {
			return time.Duration(n * float64(time.Second))
		}
	default:
		if n := v.Int(key, 0); n > 0 {
			return time.Duration(n) * time.Second
		}
		if f, ok := x.(float64); ok && f > 0 {
			return time.Duration(f * float64(time.Second))
		}
	}
	return def
}

// AsStrings converts a YAML/JSON value to a list of strings.
func AsStrings(x any) []string {
	switch t := x.(type) {
	case nil:
		return nil
	case string:
		return []string{t}
	case []string:
		return append([]string(nil), t...)
	case []any:
		out := make([]string, 0, len(t))
		for _, e := range t {
			switch s := e.(type) {
			case string:
				out = append(out, s)
			case nil:
			default:
				out = append(out, fmt.Sprint(s))
			}
		}
		return out
	}
	return nil
}

// AsValues converts a YAML/JSON mapping to Values (nil otherwise).
func AsValues(x any) Values {
	switch t := x.(type) {
	case Values:
		return t
	case map[string]any:
		return Values(t)
	case map[any]any:
		out := make(Values, len(t))
		for k, e := range t {
			out[fmt.Sprint(k)] = e
		}
		return out
	}
	return nil
}
