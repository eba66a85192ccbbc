package ingress

// maxJSONDepth bounds nesting before a payload is parsed (fastjson's own
// limit; GitHub payloads nest fewer than 10 levels).
const maxJSONDepth = 300

// validJSON reports whether b is exactly one JSON value (RFC 8259, as
// encoding/json.Valid decides it — bytes ≥ 0x80 are not UTF-8-checked)
// nested at most maxJSONDepth deep. It allocates nothing for payloads nested
// up to 64 levels, and runs several times faster than encoding/json.Valid,
// which matters on the webhook path (see BenchmarkWebhook). It is
// differentially fuzzed against encoding/json (FuzzValidJSON).
func validJSON(b []byte) bool {
	var stackBuf [64]byte
	stack := stackBuf[:0] // '{' or '['
	i := skipWS(b, 0)
	// expectValue: a value must come next.
	for {
		if i >= len(b) {
			return false
		}
		// Parse one value at b[i].
		switch c := b[i]; {
		case c == '{' || c == '[':
			if len(stack) >= maxJSONDepth {
				return false
			}
			stack = append(stack, c)
			i = skipWS(b, i+1)
			if i < len(b) && (c == '{' && b[i] == '}' || c == '[' && b[i] == ']') {
				stack = stack[:len(stack)-1]
				i++
				break
			}
			if c == '{' {
				// A key, a colon, then a value.
				var ok bool
				if i, ok = scanKey(b, i); !ok {
					return false
				}
			}
			continue
		case c == '"':
			var ok bool
			if i, ok = scanString(b, i); !ok {
				return false
			}
		case c == '-' || c >= '0' && c <= '9':
			var ok bool
			if i, ok = scanNumber(b, i); !ok {
				return false
			}
		case c == 't':
			if !hasLit(b, i, "true") {
				return false
			}
			i += 4
		case c == 'f':
			if !hasLit(b, i, "false") {
				return false
			}
			i += 5
		case c == 'n':
			if !hasLit(b, i, "null") {
				return false
			}
			i += 4
		default:
			return false
		}
		// After a value: close containers or move to the next element.
		for {
			i = skipWS(b, i)
			if len(stack) == 0 {
				return i == len(b)
			}
			if i >= len(b) {
				return false
			}
			top := stack[len(stack)-1]
			switch {
			case b[i] == ',':
				i = skipWS(b, i+1)
				if top == '{' {
					var ok bool
					if i, ok = scanKey(b, i); !ok {
						return false
					}
				}
			case top == '{' && b[i] == '}' || top == '[' && b[i] == ']':
				stack = stack[:len(stack)-1]
				i++
				continue
			default:
				return false
			}
			break
		}
	}
}

// scanKey scans `"key" :` at b[i] and returns the index after the colon and
// any whitespace.
func scanKey(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '"' {
		return i, false
	}
	i, ok := scanString(b, i)
	if !ok {
		return i, false
	}
	i = skipWS(b, i)
	if i >= len(b) || b[i] != ':' {
		return i, false
	}
	return skipWS(b, i+1), true
}

func skipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

func hasLit(b []byte, i int, lit string) bool {
	return len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit
}

// scanString scans the string starting at b[i] == '"' and returns the index
// after its closing quote.
func scanString(b []byte, i int) (int, bool) {
	i++
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			return i + 1, true
		case c == '\\':
			if i+1 >= len(b) {
				return i, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if len(b)-i < 6 || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return i, false
				}
				i += 6
			default:
				return i, false
			}
		case c < 0x20:
			return i, false
		default:
			i++
		}
	}
	return i, false
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// scanNumber scans -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? at b[i].
func scanNumber(b []byte, i int) (int, bool) {
	if b[i] == '-' {
		i++
	}
	if i >= len(b) {
		return i, false
	}
	switch {
	case b[i] == '0':
		i++
	case b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return i, false
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return i, false
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	return i, true
}
