package integrations

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Arguments arrive as JSON-shaped maps, possibly decoded from JSON (numbers
// as float64, lists as []any) or built in Go ([]string, int). These helpers
// accept both and name the offending key when the shape is wrong.

func argString(args map[string]any, key string, required bool) (string, error) {
	v, ok := args[key]
	if !ok || v == nil {
		if required {
			return "", fail(ErrInvalidArgument, "argument %q is required", key)
		}
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", fail(ErrInvalidArgument, "argument %q must be a string, not %T", key, v)
	}
	if required && strings.TrimSpace(s) == "" {
		return "", fail(ErrInvalidArgument, "argument %q must not be empty", key)
	}
	return s, nil
}

func argStrings(args map[string]any, key string) ([]string, error) {
	v, ok := args[key]
	if !ok || v == nil {
		return nil, fail(ErrInvalidArgument, "argument %q is required (a list of strings)", key)
	}
	switch x := v.(type) {
	case []string:
		return append([]string(nil), x...), nil
	case []any:
		out := make([]string, 0, len(x))
		for i, e := range x {
			s, ok := e.(string)
			if !ok {
				return nil, fail(ErrInvalidArgument, "argument %q[%d] must be a string, not %T", key, i, e)
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, fail(ErrInvalidArgument, "argument %q must be a list of strings, not %T", key, v)
}

// argInt returns an integer argument; present is false when it is absent.
func argInt(args map[string]any, key string) (n int, present bool, err error) {
	v, ok := args[key]
	if !ok || v == nil {
		return 0, false, nil
	}
	bad := fail(ErrInvalidArgument, "argument %q must be a positive integer", key)
	switch x := v.(type) {
	case int:
		n = x
	case int64:
		n = int(x)
	case float64:
		if x != math.Trunc(x) || x <= 0 || x > 1<<53 {
			return 0, true, bad
		}
		n = int(x)
	case json.Number:
		i, err := x.Int64()
		if err != nil {
			return 0, true, bad
		}
		n = int(i)
	case string:
		i, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64)
		if err != nil {
			return 0, true, bad
		}
		n = int(i)
	default:
		return 0, true, fail(ErrInvalidArgument, "argument %q must be an integer, not %T", key, v)
	}
	if n <= 0 {
		return 0, true, bad
	}
	return n, true, nil
}

// checkLabel refuses labels GitHub would reject or that would corrupt a
// query: empty, control characters, commas (the list separator of the
// issues endpoint's labels filter).
func checkLabel(key, l string) error {
	if strings.TrimSpace(l) == "" {
		return fail(ErrInvalidArgument, "argument %q: a label must not be empty", key)
	}
	for _, r := range l {
		if r < 0x20 || r == 0x7f {
			return fail(ErrInvalidArgument, "argument %q: label %q contains a control character", key, clip(l, 60))
		}
	}
	if len(l) > 100 {
		return fail(ErrInvalidArgument, "argument %q: label %q is longer than 100 bytes", key, clip(l, 60))
	}
	return nil
}

func toAnyStrings(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func containsFold(list []string, s string) bool {
	for _, e := range list {
		if strings.EqualFold(e, s) {
			return true
		}
	}
	return false
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// clip shortens s for an error message, on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
