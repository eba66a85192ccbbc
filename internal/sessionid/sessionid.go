// Package sessionid is the one rule for a harness session id, shared by
// sessions (the registry, the Stop hook's lookup) and loop (the outbox,
// whose directory a session id names), which sit on different floors.
package sessionid

// Valid reports whether id is ASCII letters and digits, then also . _ -,
// at most 128 bytes: it never starts with "-" (no flag) or "." and never
// carries a separator, so it is safe as a file or directory name. It is
// written out by hand: the Stop hook calls it on every stop, and the
// equivalent regular expression takes milliseconds to compile.
func Valid(id string) bool {
	if len(id) == 0 || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == '-'):
		default:
			return false
		}
	}
	return true
}
