package loop

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ShowValue is a setting's value as `loopctl config show` and the dashboard's Settings page print it: never Go's own
// rendering (<nil>, map[…], {…}). A value never set is "(not set)" (the
// key's documented default applies: loopctl config schema); an empty one
// "(none)"; a list is
// comma-separated; a map is key=value pairs in key order; a duration is its
// seconds, as the config writes it; anything else is its JSON.
func ShowValue(v any) string {
	if d, ok := v.(time.Duration); ok {
		return strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
	}
	rv := reflect.ValueOf(v)
	for rv.IsValid() && (rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Interface) {
		if rv.IsNil() {
			return "(not set)"
		}
		rv = rv.Elem()
	}
	if !rv.IsValid() {
		return "(not set)"
	}
	switch rv.Kind() {
	case reflect.String:
		if rv.Len() == 0 {
			return `""`
		}
		return rv.String()
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return fmt.Sprint(rv.Interface())
	case reflect.Slice, reflect.Array:
		if rv.Kind() == reflect.Slice && rv.IsNil() {
			return "(not set)"
		}
		if rv.Len() == 0 {
			return "(none)"
		}
		parts := make([]string, rv.Len())
		for i := range parts {
			parts[i] = ShowValue(rv.Index(i).Interface())
		}
		return strings.Join(parts, ", ")
	case reflect.Map:
		if rv.IsNil() {
			return "(not set)"
		}
		if rv.Len() == 0 {
			return "(none)"
		}
		parts := make([]string, 0, rv.Len())
		for _, k := range rv.MapKeys() {
			parts = append(parts, ShowValue(k.Interface())+"="+ShowValue(rv.MapIndex(k).Interface()))
		}
		sort.Strings(parts)
		return strings.Join(parts, ", ")
	}
	b, err := json.Marshal(rv.Interface())
	if err != nil {
		return fmt.Sprint(rv.Interface())
	}
	return string(b)
}
