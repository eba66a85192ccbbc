package loop_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph/graphfile"
	"github.com/theloop-dev/theloop/loop"
)

// Issue 11's case: a misspelled gate parameter used to compile silently and
// the check vanished. Every shipped hook declares its parameters, so it now
// fails at load naming node, hook, key and the valid keys.
func TestShippedHooksRefuseMisspelledParameters(t *testing.T) {
	const g = `
nodes:
  - id: requirements
    produces: requirements.md
    exit:
      - hook: validate-artifacts
        with: {sectoins: [Goals], lockd: true}
      - hook: log-entry
        with: {into: log.md}
  - id: done
    terminal: true
edges:
  - {from: requirements, on: pass, to: done}
`
	_, err := graphfile.Load("g.yaml", []byte(g), loop.ShippedHooks())
	require.Error(t, err)
	for _, want := range []string{
		"node 'requirements': hook 'validate-artifacts' has no parameter 'sectoins'; valid parameters are: checkmarks, frontMatter, locked, onlyWhenSkipped, reviewed, sections, validates",
		"hook 'validate-artifacts' has no parameter 'lockd'",
		"hook 'log-entry' has no parameter 'into'; valid parameters are: (none",
	} {
		require.Contains(t, err.Error(), want)
	}
	for _, spec := range loop.ShippedHooks().Specs() {
		require.True(t, spec.ParamsDeclared(), "shipped hook %s declares its parameters (graph.NoParams when it takes none)", spec.Name)
	}
}
