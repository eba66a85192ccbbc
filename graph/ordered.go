package graph

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
)

// OrderedMap is a string-keyed map that remembers insertion order, so that
// graph-state.json keeps its keys in the order nodes were touched (stable,
// reviewable diffs). The zero value is ready to use. Not safe for concurrent
// mutation.
//
// Entries live in one slice, found by a linear scan while the map is small
// (a work item's state holds a handful of entries) and through an index
// past indexAfter entries: a state is cloned on every load and save of the
// in-memory stores, and copying one short slice costs a fraction of
// cloning a Go map of large records.
type OrderedMap[V any] struct {
	entries []orderedEntry[V]
	idx     map[string]int // nil while len(entries) <= indexAfter
}

type orderedEntry[V any] struct {
	key string
	val V
}

// indexAfter is the size past which lookups go through an index.
const indexAfter = 8

// Len returns the number of entries.
func (o *OrderedMap[V]) Len() int { return len(o.entries) }

// Keys returns the keys in insertion order.
func (o *OrderedMap[V]) Keys() []string {
	if len(o.entries) == 0 {
		return nil
	}
	keys := make([]string, len(o.entries))
	for i, e := range o.entries {
		keys[i] = e.key
	}
	return keys
}

// find returns k's position, or -1.
func (o *OrderedMap[V]) find(k string) int {
	if o.idx != nil {
		if i, ok := o.idx[k]; ok {
			return i
		}
		return -1
	}
	for i := range o.entries {
		if o.entries[i].key == k {
			return i
		}
	}
	return -1
}

// Get returns the value for k.
func (o *OrderedMap[V]) Get(k string) (V, bool) {
	if i := o.find(k); i >= 0 {
		return o.entries[i].val, true
	}
	var zero V
	return zero, false
}

// ref returns a pointer to k's value, appending a zero value under k when
// absent. The pointer is valid until the map next changes shape (Set of a
// new key, Delete).
func (o *OrderedMap[V]) ref(k string) *V {
	i := o.find(k)
	if i < 0 {
		var zero V
		o.Set(k, zero)
		i = len(o.entries) - 1
	}
	return &o.entries[i].val
}

// Has reports whether k is present.
func (o *OrderedMap[V]) Has(k string) bool { return o.find(k) >= 0 }

// Set stores v under k, appending k when new.
func (o *OrderedMap[V]) Set(k string, v V) {
	if i := o.find(k); i >= 0 {
		o.entries[i].val = v
		return
	}
	o.entries = append(o.entries, orderedEntry[V]{k, v})
	switch {
	case o.idx != nil:
		o.idx[k] = len(o.entries) - 1
	case len(o.entries) > indexAfter:
		o.reindex()
	}
}

// reindex rebuilds the index from the keys (none while small).
func (o *OrderedMap[V]) reindex() {
	if len(o.entries) <= indexAfter {
		o.idx = nil
		return
	}
	o.idx = make(map[string]int, len(o.entries))
	for i, e := range o.entries {
		o.idx[e.key] = i
	}
}

// SetDefault stores v under k only when k is absent, and reports whether it
// did.
func (o *OrderedMap[V]) SetDefault(k string, v V) bool {
	if o.Has(k) {
		return false
	}
	o.Set(k, v)
	return true
}

// Delete removes k.
func (o *OrderedMap[V]) Delete(k string) {
	i := o.find(k)
	if i < 0 {
		return
	}
	o.entries = append(o.entries[:i:i], o.entries[i+1:]...)
	if o.idx != nil {
		o.reindex()
	}
}

// Clone returns a shallow copy.
func (o *OrderedMap[V]) Clone() OrderedMap[V] {
	c := OrderedMap[V]{entries: slices.Clone(o.entries)}
	if o.idx != nil {
		c.idx = maps.Clone(o.idx)
	}
	return c
}

// MarshalJSON writes the entries in insertion order.
func (o OrderedMap[V]) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, e := range o.entries {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, err := json.Marshal(e.key)
		if err != nil {
			return nil, err
		}
		b.Write(kb)
		b.WriteByte(':')
		vb, err := marshalNoEscape(e.val)
		if err != nil {
			return nil, err
		}
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads an object, keeping key order. Entries whose value does
// not decode as V (for instance a node record that is not an object) are
// dropped rather than failing the whole file: the state is agent-writable
// and a bad entry must not cost the good ones. null, or a value that is not
// an object at all, reads as empty.
func (o *OrderedMap[V]) UnmarshalJSON(data []byte) error {
	*o = OrderedMap[V]{}
	var m map[string]json.RawMessage
	if json.Unmarshal(data, &m) != nil || m == nil {
		return nil
	}
	for _, k := range objectKeys(bytes.TrimSpace(data)) {
		raw := m[k]
		if !isJSONObject(raw) {
			continue
		}
		var v V
		if err := json.Unmarshal(raw, &v); err != nil {
			continue
		}
		o.Set(k, v)
	}
	return nil
}

// objectKeys returns the keys of a valid JSON object in the order written
// (first occurrence first), scanning the bytes once.
func objectKeys(data []byte) []string {
	var keys []string
	depth, expectKey := 0, false
	for i := 0; i < len(data); i++ {
		switch c := data[i]; c {
		case '{', '[':
			depth++
			expectKey = c == '{' && depth == 1
		case '}', ']':
			depth--
		case ',':
			expectKey = depth == 1
		case '"':
			j := i + 1
			for j < len(data) && data[j] != '"' {
				if data[j] == '\\' {
					j++
				}
				j++
			}
			if depth == 1 && expectKey && j < len(data) {
				var k string
				if json.Unmarshal(data[i:j+1], &k) == nil {
					keys = append(keys, k)
				}
				expectKey = false
			}
			i = j
		}
	}
	return keys
}

func isJSONObject(raw []byte) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{'
}

// marshalNoEscape is json.Marshal without HTML escaping of <, > and &.
func marshalNoEscape(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}
