package ingress

import (
	"encoding/binary"
	"math/bits"
)

// Word constants of scanString's eight-byte skip.
const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
	ctl = 0x2020202020202020 // bytes below 0x20
)

// maxJSONDepth bounds nesting before a payload is read (a common parser
// limit; GitHub payloads nest fewer than 10 levels).
const maxJSONDepth = 300

// validJSON reports whether b is exactly one JSON value (RFC 8259, as
// encoding/json.Valid decides it — bytes ≥ 0x80 are not UTF-8-checked)
// nested at most maxJSONDepth deep. It allocates nothing for payloads nested
// up to 64 levels, and runs several times faster than encoding/json.Valid,
// which matters on the webhook path (see BenchmarkWebhook). It is
// differentially fuzzed against encoding/json (FuzzValidJSON).
func validJSON(b []byte) bool { return validate(b, nil) }

// jsonIndex records, while a document is validated, the members of its
// top-level object and of the objects that are that object's member values
// (depth 1 and 2), so that reading them needs no second pass over the
// bytes. Offsets index the validated document.
type jsonIndex struct {
	// objects are the start offsets of the indexed objects; an object's id
	// is its position here (the top-level object is 0).
	objects []int32
	members []jsonMember
}

type jsonMember struct {
	object           int32
	keyStart, keyEnd int32 // between the quotes
	valStart, valEnd int32
}

func (x *jsonIndex) reset() {
	x.objects = x.objects[:0]
	x.members = x.members[:0]
}

// frame is one open container of validate.
type frame struct {
	kind    byte
	object  int32 // index id, -1 when not indexed
	pending int32 // member awaiting its value's end, -1 when none
}

// validate is validJSON, filling idx (when not nil) as it goes.
func validate(b []byte, idx *jsonIndex) bool {
	if len(b) >= 1<<31 {
		return false // offsets are int32
	}
	if idx != nil {
		idx.reset()
	}
	var stackBuf [64]frame
	stack := stackBuf[:0]
	// done records the end of the value that just completed inside the
	// top frame.
	done := func(i int) {
		if n := len(stack); n > 0 && stack[n-1].pending >= 0 {
			idx.members[stack[n-1].pending].valEnd = int32(i)
			stack[n-1].pending = -1
		}
	}
	// key scans a member's key in the top frame (an object) and records it.
	key := func(i int) (int, bool) {
		if i >= len(b) || b[i] != '"' {
			return i, false
		}
		end, ok := scanString(b, i)
		if !ok {
			return end, false
		}
		j := skipWS(b, end)
		if j >= len(b) || b[j] != ':' {
			return j, false
		}
		j = skipWS(b, j+1)
		if top := &stack[len(stack)-1]; top.object >= 0 {
			idx.members = append(idx.members, jsonMember{object: top.object, keyStart: int32(i + 1), keyEnd: int32(end - 1), valStart: int32(j)})
			top.pending = int32(len(idx.members) - 1)
		}
		return j, true
	}
	i := skipWS(b, 0)
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
			f := frame{kind: c, object: -1, pending: -1}
			// Indexed: the top-level object, and objects that are member
			// values of an indexed object at depth 1.
			if idx != nil && c == '{' && (len(stack) == 0 || len(stack) == 1 && stack[0].object >= 0 && stack[0].pending >= 0) {
				f.object = int32(len(idx.objects))
				idx.objects = append(idx.objects, int32(i))
			}
			stack = append(stack, f)
			i = skipWS(b, i+1)
			if i < len(b) && (c == '{' && b[i] == '}' || c == '[' && b[i] == ']') {
				stack = stack[:len(stack)-1]
				i++
				if idx != nil {
					done(i)
				}
				break
			}
			if c == '{' {
				var ok bool
				if i, ok = key(i); !ok {
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
		if idx != nil {
			done(i)
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
			top := stack[len(stack)-1].kind
			switch {
			case b[i] == ',':
				i = skipWS(b, i+1)
				if top == '{' {
					var ok bool
					if i, ok = key(i); !ok {
						return false
					}
				}
			case top == '{' && b[i] == '}' || top == '[' && b[i] == ']':
				stack = stack[:len(stack)-1]
				i++
				if idx != nil {
					done(i)
				}
				continue
			default:
				return false
			}
			break
		}
	}
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
		// Skip eight plain bytes at a time: none is '"', '\\' or a control
		// character. In a flagged word the borrow can flag a byte after a
		// true hit, never before one, so the lowest flag is exact.
		for i+8 <= len(b) {
			x := binary.LittleEndian.Uint64(b[i:])
			q := x ^ 0x2222222222222222 // '"'
			s := x ^ 0x5c5c5c5c5c5c5c5c // '\\'
			hit := (((q - lsb) &^ q) | ((s - lsb) &^ s) | ((x - ctl) &^ x)) & msb
			if hit != 0 {
				// The lowest flagged byte is a true hit: jump to it.
				i += bits.TrailingZeros64(hit) >> 3
				break
			}
			i += 8
		}
		if i >= len(b) {
			break
		}
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
