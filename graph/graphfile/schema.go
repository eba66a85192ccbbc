package graphfile

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/theloop-dev/theloop/graph"
)

// hookParamsKey is where SchemaFor puts the per-hook parameter rules: an
// allOf of if/then clauses on the mapping form of a hook reference.
const hookParamsKey = "allOf"

// SchemaFor returns the graph JSON Schema with the `with:` parameters of
// every hook in specs that declares them: an editor pointed at it completes
// and checks parameter names and types. graph.schema.json is
// SchemaFor(the shipped hooks) — a test in package loop keeps them equal.
//
// Parse validates against the same schema minus these rules, so a wrong
// parameter is reported by Compile, which names the node, the hook, the key
// and the valid keys, and knows every registry (not only the shipped one).
func SchemaFor(specs []graph.HookSpec) ([]byte, error) {
	root, ref, err := decodeSchema()
	if err != nil {
		return nil, err
	}
	var rules []any
	for _, s := range specs {
		if !s.ParamsDeclared() {
			continue
		}
		props := map[string]any{}
		var required []string
		for _, p := range s.Params {
			t := paramSchema(p.Type)
			if p.Summary != "" {
				t["description"] = p.Summary
			}
			props[p.Name] = t
			if p.Required {
				required = append(required, p.Name)
			}
		}
		with := map[string]any{"type": []string{"object", "null"}, "additionalProperties": false, "properties": props}
		if len(required) > 0 {
			with["required"] = required
		}
		rules = append(rules, map[string]any{
			"if":   map[string]any{"properties": map[string]any{"hook": map[string]any{"const": s.Name}}},
			"then": map[string]any{"properties": map[string]any{"with": with}},
		})
	}
	if len(rules) > 0 {
		ref[hookParamsKey] = rules
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(root); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// validationSchema is SchemaJSON without the per-hook parameter rules.
func validationSchema() (map[string]any, error) {
	root, _, err := decodeSchema()
	return root, err
}

// decodeSchema decodes SchemaJSON, removes any per-hook parameter rules and
// returns the root and the mapping form of hookRef.
func decodeSchema() (map[string]any, map[string]any, error) {
	var root map[string]any
	if err := json.Unmarshal(SchemaJSON, &root); err != nil {
		return nil, nil, fmt.Errorf("graph schema: %w", err)
	}
	defs, _ := root["definitions"].(map[string]any)
	hookRef, _ := defs["hookRef"].(map[string]any)
	forms, _ := hookRef["oneOf"].([]any)
	for _, f := range forms {
		if m, ok := f.(map[string]any); ok && m["type"] == "object" {
			delete(m, hookParamsKey)
			return root, m, nil
		}
	}
	return nil, nil, fmt.Errorf("graph schema: definitions.hookRef has no mapping form")
}

func paramSchema(t graph.ParamType) map[string]any {
	switch t {
	case graph.ParamString:
		return map[string]any{"type": "string"}
	case graph.ParamStrings:
		return map[string]any{"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "array", "items": map[string]any{"type": "string"}}}}
	case graph.ParamBool:
		return map[string]any{"type": "boolean"}
	case graph.ParamInt:
		return map[string]any{"type": "integer"}
	case graph.ParamDuration:
		return map[string]any{"type": []string{"string", "number"}}
	case graph.ParamMap:
		return map[string]any{"type": "object"}
	}
	return map[string]any{}
}
