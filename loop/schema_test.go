package loop_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/goccy/go-yaml"
	"github.com/xeipuuv/gojsonschema"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph/graphfile"
	"github.com/theloop-dev/theloop/loop"
)

// graph.schema.json carries every shipped hook's declared parameters, so an
// editor completes and checks `with:` keys. Regenerate after changing a
// declaration with: UPDATE_SCHEMA=1 go test ./loop/ -run TestSchemaDeclaresShippedHookParameters
func TestSchemaDeclaresShippedHookParameters(t *testing.T) {
	want, err := graphfile.SchemaFor(loop.ShippedHooks().Specs())
	require.NoError(t, err)
	if os.Getenv("UPDATE_SCHEMA") == "1" {
		require.NoError(t, os.WriteFile("../graph/graphfile/graph.schema.json", want, 0o644))
		return
	}
	require.Equal(t, string(want), string(graphfile.SchemaJSON),
		"graph/graphfile/graph.schema.json is out of date; run UPDATE_SCHEMA=1 go test ./loop/ -run TestSchemaDeclaresShippedHookParameters")
}

// The full schema (with the parameter rules) accepts every shipped graph and
// refuses a misspelled parameter: what an editor shows agrees with Compile.
func TestFullSchemaAcceptsShippedGraphs(t *testing.T) {
	schema, err := gojsonschema.NewSchema(gojsonschema.NewBytesLoader(graphfile.SchemaJSON))
	require.NoError(t, err)
	files, err := filepath.Glob("graphs/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	validate := func(src []byte) *gojsonschema.Result {
		var v any
		require.NoError(t, yaml.Unmarshal(src, &v))
		res, err := schema.Validate(gojsonschema.NewGoLoader(v))
		require.NoError(t, err)
		return res
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		res := validate(src)
		require.True(t, res.Valid(), "%s: %v", f, res.Errors())
	}
	bad := validate([]byte("nodes:\n  - id: a\n    exit:\n      - hook: validate-artifacts\n        with: {sectoins: [A]}\n"))
	require.False(t, bad.Valid(), "the schema refuses an unknown validate-artifacts parameter")
}
