package hooks_test

import (
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/hooks"
)

// hookName is how a hook name looks in prose: lower-case words joined by
// hyphens (or one word).
var hookName = regexp.MustCompile("[a-z]+(?:-[a-z]+)*")

func shippedNames() []string {
	var names []string
	for _, s := range hooks.Specs() {
		names = append(names, s.Name)
	}
	slices.Sort(names)
	return names
}

// TestDocsListEveryShippedHook holds docs/graph.md §7's list to the
// registry: every shipped hook is named there, and nothing else is.
func TestDocsListEveryShippedHook(t *testing.T) {
	b, err := os.ReadFile("../docs/graph.md")
	require.NoError(t, err)
	doc := string(b)
	_, sec, ok := strings.Cut(doc, "\n## 7. Shipped hooks\n")
	require.True(t, ok, "docs/graph.md has its section 7, Shipped hooks")
	list, _, _ := strings.Cut(strings.TrimLeft(sec, "\n"), "\n\n")
	var listed []string
	for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(list, -1) {
		if hookName.MatchString(m[1]) && hookName.FindString(m[1]) == m[1] {
			listed = append(listed, m[1])
		}
	}
	slices.Sort(listed)
	require.Equal(t, shippedNames(), listed, "docs/graph.md §7's first paragraph lists exactly the hooks hooks.Specs registers: add or remove the names there")
}

// TestPackageDocNamesEveryShippedHook holds the package comment's lists
// (the parenthesised names in doc.go) to the registry.
func TestPackageDocNamesEveryShippedHook(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "doc.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	require.NoError(t, err)
	require.NotNil(t, f.Doc, "doc.go carries the package comment")
	var named []string
	for _, m := range regexp.MustCompile(`\(([^)]*)\)`).FindAllStringSubmatch(f.Doc.Text(), -1) {
		for _, part := range strings.Split(m[1], ",") {
			part = strings.TrimSpace(part)
			if part != "" && hookName.FindString(part) == part {
				named = append(named, part)
			}
		}
	}
	slices.Sort(named)
	require.Equal(t, shippedNames(), named, "hooks/doc.go's lists name exactly the hooks Specs registers")
}
