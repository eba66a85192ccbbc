package ingress

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// jv is the bytes of one JSON value inside a document that validJSON has
// accepted. It reads fields lazily: an object is scanned key by key and the
// values not asked for are skipped without being decoded, so pulling a
// dozen fields out of a 15 KB payload costs about one pass over the bytes
// and allocates only the strings returned. Duplicate keys resolve to the
// last occurrence, as encoding/json decides. A nil jv is "absent"; every
// method accepts it. Methods never panic, even on bytes validJSON would
// refuse (FuzzLazyJSON), though their answers are then meaningless.
type jv []byte

// kind is the first byte: '{', '[', '"', 't', 'f', 'n', or a number's
// first byte; 0 when absent.
func (v jv) kind() byte {
	if len(v) == 0 {
		return 0
	}
	return v[0]
}

// get returns the value of key in an object, nil when v is not an object or
// lacks the key.
func (v jv) get(key string) jv {
	var out jv
	v.eachField(func(k []byte, val jv) {
		if keyEquals(k, key) {
			out = val
		}
	})
	return out
}

// path walks nested objects.
func (v jv) path(keys ...string) jv {
	for _, k := range keys {
		v = v.get(k)
		if v == nil {
			return nil
		}
	}
	return v
}

// fields collects several keys of an object in one pass: out[i] is the
// value of keys[i] (nil when absent).
func (v jv) fields(keys []string, out []jv) {
	v.eachField(func(k []byte, val jv) {
		for i, want := range keys {
			if keyEquals(k, want) {
				out[i] = val
			}
		}
	})
}

// keyEquals compares a raw key (between its quotes) with want.
func keyEquals(raw []byte, want string) bool {
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw) == want
	}
	var s string
	q := make([]byte, 0, len(raw)+2)
	q = append(append(append(q, '"'), raw...), '"')
	return json.Unmarshal(q, &s) == nil && s == want
}

// eachField calls f with every key (raw, between its quotes) and value of
// an object, in order.
func (v jv) eachField(f func(key []byte, val jv)) {
	if v.kind() != '{' {
		return
	}
	i := skipWS(v, 1)
	for i < len(v) && v[i] == '"' {
		end := skipString(v, i)
		if end < 0 {
			return
		}
		key := v[i+1 : end-1]
		i = skipWS(v, end)
		if i >= len(v) || v[i] != ':' {
			return
		}
		i = skipWS(v, i+1)
		vend := skipValue(v, i)
		if vend < 0 {
			return
		}
		f(key, v[i:vend])
		i = skipWS(v, vend)
		if i >= len(v) || v[i] != ',' {
			return
		}
		i = skipWS(v, i+1)
	}
}

// elems calls f with every element of an array.
func (v jv) elems(f func(jv)) {
	if v.kind() != '[' {
		return
	}
	i := skipWS(v, 1)
	for i < len(v) && v[i] != ']' {
		end := skipValue(v, i)
		if end < 0 {
			return
		}
		f(v[i:end])
		i = skipWS(v, end)
		if i >= len(v) || v[i] != ',' {
			return
		}
		i = skipWS(v, i+1)
	}
}

// str returns a string value, decoded as encoding/json decodes it (escapes
// resolved, invalid UTF-8 replaced); ok is false for anything else.
func (v jv) str() (string, bool) {
	if v.kind() != '"' || len(v) < 2 || v[len(v)-1] != '"' {
		return "", false
	}
	inner := v[1 : len(v)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner), true
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
}

// string is str without the flag ("" for a non-string).
func (v jv) string() string {
	s, _ := v.str()
	return s
}

// int returns an integer value (no fraction, no exponent, fits in int64).
func (v jv) int() (int64, bool) {
	if len(v) == 0 || len(v) > 20 {
		return 0, false
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	return n, err == nil
}

// skipString returns the index after the string starting at v[i] == '"',
// or -1.
func skipString(v []byte, i int) int {
	j := i + 1
	for {
		k := bytes.IndexByte(v[j:], '"')
		if k < 0 {
			return -1
		}
		j += k
		// An odd run of backslashes before the quote escapes it.
		n := 0
		for p := j - 1; p > i && v[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return j + 1
		}
		j++
	}
}

// skipValue returns the index after the value starting at v[i], or -1.
func skipValue(v []byte, i int) int {
	if i >= len(v) {
		return -1
	}
	switch v[i] {
	case '"':
		return skipString(v, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(v); j++ {
			switch v[j] {
			case '"':
				e := skipString(v, j)
				if e < 0 {
					return -1
				}
				j = e - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	default:
		j := i
		for j < len(v) {
			switch v[j] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return j
			}
			j++
		}
		return j
	}
}

// doc is a validated document and the index validate built for it. Its
// reads answer from the index for indexed objects and fall back to the
// byte scan of jv elsewhere, with the same results (FuzzLazyJSON).
type doc struct {
	b   []byte
	idx *jsonIndex
}

// object returns the index id of v when v is an indexed object of d (a
// subslice of d.b starting at a recorded object), else -1.
func (d *doc) object(v jv) int32 {
	if d == nil || d.idx == nil || v.kind() != '{' || len(d.b) == 0 {
		return -1
	}
	off := cap(d.b) - cap(v)
	if off < 0 || off >= len(d.b) || &d.b[off] != &v[0] {
		return -1
	}
	for id, start := range d.idx.objects {
		if int(start) == off {
			return int32(id)
		}
	}
	return -1
}

// fields is jv.fields through the index.
func (d *doc) fields(v jv, keys []string, out []jv) {
	id := d.object(v)
	if id < 0 {
		v.fields(keys, out)
		return
	}
	for _, m := range d.idx.members {
		if m.object != id {
			continue
		}
		k := d.b[m.keyStart:m.keyEnd]
		for i, want := range keys {
			if len(k) >= len(want) && keyEquals(k, want) {
				out[i] = jv(d.b[m.valStart:m.valEnd])
			}
		}
	}
}

// get is jv.get through the index.
func (d *doc) get(v jv, key string) jv {
	var out [1]jv
	d.fields(v, []string{key}, out[:])
	return out[0]
}
