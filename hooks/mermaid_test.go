package hooks_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/hooks"
)

func block(lines ...string) string {
	return "# Doc\n\n```mermaid\n" + strings.Join(lines, "\n") + "\n```\n"
}

// R5.4: every mermaid block parses — flowcharts and sequence diagrams by
// their grammar's common subset, other types by keyword.
func TestMermaidParses(t *testing.T) {
	valid := map[string][]string{
		"the demo's design":          {"flowchart LR", `  R[report] --> W["csv writer"] --> F[(file)]`},
		"every shape":                {"graph TD", "  a[rect] --> b(round) --> c([stadium]) --> d[[sub]] --> e[(db)] --> f((circle))", "  g{decision} --> h{{hex}} --> i>flag] --> j[/para/] --> k[\\alt\\] --> l[/trap\\] --> m(((double)))"},
		"links and their text":       {"flowchart TB", "  A --- B", "  A -->|yes| C", "  A -- no --> D", "  A -.-> E", "  A -. maybe .-> F", "  A ==> G", "  A == sure ==> H", "  A ~~~ I", "  A <--> J", "  A o--o K", "  A x--x L", "  A --o M", "  A ---> N", "  A -->|\"quoted (ok)\"| O", "  A -.validated by.-> P", "  A -.->|one; two| Q", "  A -- a-b --> R"},
		"no spaces, semicolons":      {"graph LR;", "  A-->B;B-->C", "  C---D"},
		"ampersands and classes":     {"flowchart TD", "  A & B --> C & D", "  C:::hot --> E", "  classDef hot fill:#f96", "  class D hot", "  style E fill:#bbf", "  linkStyle 0 stroke:#f00", "  click A href \"https://example.com\""},
		"subgraphs nest":             {"flowchart TD", "  subgraph outer [The outside]", "    direction LR", "    subgraph inner", "      a --> b", "    end", "  end", "  outer --> c"},
		"comments, directives first": {"%%{init: {'theme': 'dark'}}%%", "%% why", "flowchart TD", "  %% inside", "  a --> b"},
		"front matter first":         {"---", "title: Export", "---", "flowchart TD", "  a --> b"},
		"a lone node, unicode ids":   {"flowchart TD", "  écrit[« texte »]", "  n_1.2-x"},
		"v11 shapes and edge ids":    {"flowchart TD", "  A@{ shape: rect, label: \"x\" } --> B", "  A e1@--> C"},
		"a sequence":                 {"sequenceDiagram", "  Note over A: reads it; then acts", "  autonumber", "  participant A as Alice", "  actor B", "  A->>B: hello", "  B-->>A: hi", "  A-)B: async", "  A-xB: lost", "  A->>+B: activate", "  B-->>-A: done", "  A<<->>B: both", "  Note right of A: a note", "  note over A,B: shared", "  activate A", "  deactivate A"},
		"sequence blocks":            {"sequenceDiagram", "  loop every minute", "    A->>B: ping", "  end", "  alt ok", "    B->>A: 200", "  else failed", "    B->>A: 500", "  end", "  par one", "    A->>B: x", "  and two", "    A->>C: y", "  end", "  critical lock", "    A->>B: z", "  option timeout", "    A->>B: w", "  end", "  rect rgb(0, 0, 0)", "    opt maybe", "      A->>B: v", "    end", "  end"},
		"other types by keyword":     {"stateDiagram-v2", "  [*] --> Still"},
	}
	for name, lines := range valid {
		t.Run("valid/"+name, func(t *testing.T) {
			require.Empty(t, hooks.LintMermaid(block(lines...)))
		})
	}
	invalid := []struct {
		name  string
		lines []string
		want  []string
	}{
		{"empty", nil, []string{"mermaid block 1 is empty"}},
		{"only comments", []string{"%% nothing"}, []string{"mermaid block 1 is empty"}},
		{"no diagram type", []string{"A --> B"}, []string{"mermaid block 1 does not start with a diagram type (found 'A --> B')"}},
		{"bad direction", []string{"flowchart XY", "a --> b"}, []string{"mermaid block 1 line 1: 'XY' is not a direction (TB, TD, BT, RL or LR)"}},
		{"parentheses in a square label", []string{"flowchart TD", "  A[run (fast)] --> B"}, []string{"mermaid block 1 line 2: node A: the label 'run (fast)' holds a bracket or quote mermaid reads as syntax — put the label in double quotes"}},
		{"unclosed shape", []string{"flowchart TD", "  A[open --> B"}, []string{"mermaid block 1 line 2: node A: the shape is never closed with ]"}},
		{"unclosed quote", []string{"flowchart TD", `  A["open] --> B`}, []string{"mermaid block 1 line 2: node A: the quoted label is never closed"}},
		{"not a link", []string{"flowchart TD", "  A => B"}, []string{"mermaid block 1 line 2: cannot read '=> B' as a link or a node — flowchart links are -->, ---, -.->, ==>, ~~~ (with |text| or -- text -->)"}},
		{"a link to nowhere", []string{"flowchart TD", "  A -->"}, []string{"mermaid block 1 line 2: the link at the end of 'A -->' leads to no node"}},
		{"unclosed link text", []string{"flowchart TD", "  A -->|yes B"}, []string{"mermaid block 1 line 2: cannot read '-->|yes B' as a link or a node — flowchart links are -->, ---, -.->, ==>, ~~~ (with |text| or -- text -->)"}},
		{"subgraph left open", []string{"flowchart TD", "  subgraph s", "  a --> b"}, []string{"mermaid block 1 line 2: subgraph is never closed with end"}},
		{"end without subgraph", []string{"flowchart TD", "  a --> b", "  end"}, []string{"mermaid block 1 line 3: end closes no subgraph"}},
		{"message without text", []string{"sequenceDiagram", "  A->>B"}, []string{"mermaid block 1 line 2: cannot read 'A->>B' as a sequence statement — a message is 'A->>B: text'"}},
		{"a semicolon separates statements", []string{"flowchart TD", "  A --> B; C -->"}, []string{"mermaid block 1 line 2: the link at the end of 'C -->' leads to no node"}},
		{"else outside alt", []string{"sequenceDiagram", "  loop x", "  else y", "  end"}, []string{"mermaid block 1 line 3: else belongs inside alt … end"}},
		{"block left open", []string{"sequenceDiagram", "  alt x", "  A->>B: y"}, []string{"mermaid block 1 line 2: alt is never closed with end"}},
		{"misplaced note", []string{"sequenceDiagram", "  Note above A: x"}, []string{"mermaid block 1 line 2: a note is placed 'left of X', 'right of X' or 'over X[,Y]', not 'above A'"}},
		{"findings are bounded", []string{"flowchart TD", "a[(]", "b[(]", "c[(]", "d[(]", "e[(]", "f[(]", "g[(]"}, nil},
	}
	for _, tc := range invalid {
		t.Run("invalid/"+tc.name, func(t *testing.T) {
			got := hooks.LintMermaid(block(tc.lines...))
			if tc.want == nil {
				require.Len(t, got, 5)
				return
			}
			require.Equal(t, tc.want, got)
		})
	}
}

func FuzzMermaid(f *testing.F) {
	for _, s := range []string{
		"flowchart LR\n  R[report] --> W[\"csv writer\"] --> F[(file)]",
		"graph TD;A-->B;B-.->|x|C",
		"flowchart TD\n subgraph a\n b -- t --> c\n end",
		"sequenceDiagram\n A->>+B: x\n alt y\n B-->>-A: z\n else\n end",
		"---\ntitle: t\n---\n%%{init:{}}%%\nflowchart TD\n a@{ shape: x } e@--> b",
		"flowchart TD\n a[/b\\] --> c[\\d/] & e>f]:::g",
		"sequenceDiagram\n Note over A,B: x\n rect rgb(1,2,3)\n end",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, diagram string) {
		out := hooks.LintMermaid("```mermaid\n" + diagram + "\n```\n")
		if len(out) > 5+strings.Count(diagram, "\n")+1 {
			t.Fatalf("%d findings for one block", len(out))
		}
		for _, m := range out {
			if !strings.HasPrefix(m, "mermaid block 1 ") {
				t.Fatalf("finding not about the block: %q", m)
			}
		}
	})
}

// The parser against real diagrams: the 148 mermaid blocks of the-loop
// v11's own specs (the conformance repository) all parse; the only
// findings left are the backtick check's, which predates the parser.
func TestMermaidParsesTheLoopsOwnDiagrams(t *testing.T) {
	root := filepath.Join("..", "..", "shared", "conformance", "the-loop-v11", "repo")
	if _, err := os.Stat(root); err != nil {
		t.Skip("conformance data not present (../shared/conformance)")
	}
	blocks := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".md") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		blocks += strings.Count(string(b), "```mermaid")
		for _, m := range hooks.LintMermaid(string(b)) {
			if !strings.Contains(m, "a backtick inside a node label") {
				t.Errorf("%s: %s", p, m)
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.GreaterOrEqual(t, blocks, 100)
}
