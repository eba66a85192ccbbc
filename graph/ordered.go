package graph

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// OrderedMap is a string-keyed map that remembers insertion order, so that
// graph-state.json keeps its keys in the order nodes were touched (stable,
// reviewable diffs). The zero value is ready to use. Not safe for concurrent
// mutation.
type OrderedMap[V any] struct {
	keys []string
	m    map[string]V
}

// Len returns the number of entries.
func (o *OrderedMap[V]) Len() int { return len(o.keys) }

// Keys returns the keys in insertion order.
func (o *OrderedMap[V]) Keys() []string { return append([]string(nil), o.keys...) }

// Get returns the value for k.
func (o *OrderedMap[V]) Get(k string) (V, bool) {
	v, ok := o.m[k]
	return v, ok
}

// Has reports whether k is present.
func (o *OrderedMap[V]) Has(k string) bool {
	_, ok := o.m[k]
	return ok
}

// Set stores v under k, appending k when new.
func (o *OrderedMap[V]) Set(k string, v V) {
	if o.m == nil {
		o.m = map[string]V{}
	}
	if _, ok := o.m[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.m[k] = v
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
	if !o.Has(k) {
		return
	}
	delete(o.m, k)
	for i, key := range o.keys {
		if key == k {
			o.keys = append(o.keys[:i:i], o.keys[i+1:]...)
			break
		}
	}
}

// Clone returns a shallow copy.
func (o *OrderedMap[V]) Clone() OrderedMap[V] {
	return OrderedMap[V]{keys: slices.Clone(o.keys), m: maps.Clone(o.m)}
}

// MarshalJSON writes the entries in insertion order.
func (o OrderedMap[V]) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		b.Write(kb)
		b.WriteByte(':')
		vb, err := marshalNoEscape(o.m[k])
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
// and a bad entry must not cost the good ones. null reads as empty.
func (o *OrderedMap[V]) UnmarshalJSON(data []byte) error {
	*o = OrderedMap[V]{}
	data = bytes.TrimSpace(data)
	if bytes.Equal(data, []byte("null")) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return fmt.Errorf("expected an object")
	}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return err
		}
		k, _ := kt.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return err
		}
		var v V
		if !isJSONObject(raw) {
			continue
		}
		if err := json.Unmarshal(raw, &v); err != nil {
			continue
		}
		o.Set(k, v)
	}
	_, err = dec.Token()
	return err
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
