package ingress

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/integrations"
)

func TestKindTableHoldsEveryKindOnceAndDerivesTheLists(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range Kinds() {
		require.False(t, seen[k.Name], "%s twice", k.Name)
		seen[k.Name] = true
		require.NotEmpty(t, k.Provider, k.Name)
		if k.Decides != "" {
			require.NotEmpty(t, k.CommentType, "%s may decide a gate: it needs the comment type it is re-read as", k.Name)
		}
		if k.Noun != "" {
			require.Equal(t, ActorWords, k.Actor, "%s: only words are named in a notice", k.Name)
		}
	}
	require.Equal(t, []string{KindIssues, KindIssueComment, KindPullRequest, KindPullRequestReview,
		KindPullRequestReviewComment, KindWorkflowRun, KindCheckRun, KindCheckSuite, KindStatus}, DefaultEvents())
	require.Equal(t, []string{KindIssues, KindPullRequest}, closingKinds())
	require.Equal(t, EventKind{Name: "push"}, KindOf("push"), "an unknown kind does nothing")
	require.Equal(t, &EventKind{Name: JiraCommentEvent}, routedKind(JiraCommentEvent), "the GitHub router routes no Jira kind")
}

// The App manifest lives in integrations, which ingress builds on: its
// default events are held to the table here.
func TestAppManifestSubscribesToTheTablesAppEvents(t *testing.T) {
	b, err := integrations.AppManifest(integrations.AppManifestOptions{})
	require.NoError(t, err)
	var m struct {
		Events []string `json:"default_events"`
	}
	require.NoError(t, json.Unmarshal(b, &m))
	require.Equal(t, AppEvents(), m.Events)
}

func TestRegisterKindRefusesWhatCannotRoute(t *testing.T) {
	for name, k := range map[string]EventKind{
		"empty name":      {},
		"duplicate":       {Name: KindIssues},
		"words unnamed":   {Name: "x_words", Actor: ActorWords},
		"rule no path":    {Name: "x_rule", Refs: []RefRule{{From: RefFromEntity}}},
		"rule keyword in": {Name: "x_kw", Refs: []RefRule{{Path: []string{"a"}, From: RefFromKeyword}}},
	} {
		t.Run(name, func(t *testing.T) {
			require.Panics(t, func() { RegisterKind(k) })
			if k.Name != KindIssues && k.Name != "" {
				require.Equal(t, EventKind{Name: k.Name}, KindOf(k.Name), "a refused kind is not registered")
			}
		})
	}
}

// TestNoFileSpellsAnEventKindButTheTable holds the whole module to the
// table: outside integrations/eventkinds.go (the names) no non-test file
// compares an event name with a literal kind or switches on one, and the
// kinds that are no payload field's name are not spelled at all. (A kind's
// name that is also a payload field, "pull_request" or "status", may still
// be read as that field.) The GitHub and Jira stand-ins (*sim) speak for
// the providers and are not walked.
func TestNoFileSpellsAnEventKindButTheTable(t *testing.T) {
	kinds := map[string]bool{}
	for _, k := range Kinds() {
		kinds[k.Name] = true
	}
	// Kinds no payload names a field after.
	never := map[string]bool{KindIssueComment: true, KindPullRequestTarget: true, KindPullRequestReview: true,
		KindPullRequestReviewComment: true, KindPullRequestReviewThread: true, JiraCommentEvent: true}
	// Literals that are a kind's name but mean something else.
	notKinds := map[string]string{
		"integrations/github_decode.go issues": "a URL's path segment",
		"cmd/loopctl/service.go status":        "a subcommand's name",
		"hooks/feedback.go status":             "a front-matter key",
	}
	var checked int
	{
		err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && path != ".." && (d.Name() == "testdata" || d.Name() == "vendor" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".") || strings.HasSuffix(d.Name(), "sim")) {
				return filepath.SkipDir // the GitHub and Jira stand-ins speak for the providers
			}
			rel, _ := filepath.Rel("..", path)
			rel = filepath.ToSlash(rel)
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || rel == "integrations/eventkinds.go" {
				return nil
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
			if err != nil {
				return err
			}
			checked++
			lit := func(e ast.Expr) string {
				if bl, ok := e.(*ast.BasicLit); ok && bl.Kind == token.STRING {
					if s, err := strconv.Unquote(bl.Value); err == nil && kinds[s] {
						return s
					}
				}
				return ""
			}
			ast.Inspect(f, func(n ast.Node) bool {
				var found []string
				switch n := n.(type) {
				case *ast.BasicLit:
					if s := lit(n); never[s] {
						found = append(found, s)
					}
				case *ast.BinaryExpr:
					if n.Op == token.EQL || n.Op == token.NEQ {
						found = append(found, lit(n.X), lit(n.Y))
					}
				case *ast.CaseClause:
					for _, e := range n.List {
						found = append(found, lit(e))
					}
				case *ast.CallExpr:
					if sel, ok := n.Fun.(*ast.SelectorExpr); ok && strings.HasPrefix(sel.Sel.Name, "HasPrefix") {
						for _, a := range n.Args {
							found = append(found, lit(a))
						}
					}
				}
				for _, s := range found {
					if s != "" && notKinds[rel+" "+s] == "" {
						t.Errorf("%s spells the event kind %q: use the constant of integrations/eventkinds.go (or its alias in ingress/kinds.go) or a field of the kind's entry (ingress.KindOf)", rel, s)
					}
				}
				return true
			})
			return nil
		})
		require.NoError(t, err)
	}
	require.Greater(t, checked, 300, "the walk found the module's files")
}
