package graph

import (
	"fmt"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
)

// File is a graph file as written: the YAML model before compilation.
// Field names follow the-loop's graph format (reference graph-spec §2).
type File struct {
	Version     int                 `yaml:"version" json:"version"`
	Name        string              `yaml:"name" json:"name"`
	Description string              `yaml:"description" json:"description,omitempty"`
	Start       string              `yaml:"start" json:"start"`
	SkipSets    map[string][]string `yaml:"skipSets" json:"skipSets,omitempty"`
	// OnEscalation runs when a node escalates (theloop addition).
	OnEscalation []HookRef  `yaml:"onEscalation" json:"onEscalation,omitempty"`
	Nodes        []NodeSpec `yaml:"nodes" json:"nodes"`
	Edges        []EdgeSpec `yaml:"edges" json:"edges"`

	// Source names where the file came from (for error messages).
	Source string `yaml:"-" json:"-"`
	ast    *ast.File
	// order of skipSets keys as written
	skipSetOrder []string
}

// NodeSpec is one entry of `nodes:`.
type NodeSpec struct {
	ID          string     `yaml:"id" json:"id"`
	Phase       string     `yaml:"phase" json:"phase,omitempty"`
	Actor       string     `yaml:"actor" json:"actor,omitempty"`
	Produces    StringList `yaml:"produces" json:"produces,omitempty"`
	Command     string     `yaml:"command" json:"command,omitempty"`
	Stage       string     `yaml:"stage" json:"stage,omitempty"`
	Session     string     `yaml:"session" json:"session,omitempty"`
	Required    bool       `yaml:"required" json:"required,omitempty"`
	Optional    bool       `yaml:"optional" json:"optional,omitempty"`
	Skippable   bool       `yaml:"skippable" json:"skippable,omitempty"`
	OptIn       bool       `yaml:"optIn" json:"optIn,omitempty"`
	Terminal    bool       `yaml:"terminal" json:"terminal,omitempty"`
	Description string     `yaml:"description" json:"description,omitempty"`
	MaxAttempts int        `yaml:"maxAttempts" json:"maxAttempts,omitempty"`
	Entry       []HookRef  `yaml:"entry" json:"entry,omitempty"`
	Exit        []HookRef  `yaml:"exit" json:"exit,omitempty"`
}

// EdgeSpec is one entry of `edges:`.
type EdgeSpec struct {
	From string `yaml:"from" json:"from"`
	To   string `yaml:"to" json:"to"`
	On   string `yaml:"on" json:"on"`
}

// UnmarshalYAML accepts `on` as a string or, as YAML 1.1 writers produce
// for values like `yes`, a boolean — and accepts the key itself spelled
// `true`, which is how a YAML 1.1 writer dumps an unquoted `on` key.
func (e *EdgeSpec) UnmarshalYAML(unmarshal func(any) error) error {
	// Decode generically: a YAML 1.1 `true` key does not bind to struct
	// fields.
	var raw map[string]any
	if err := unmarshal(&raw); err != nil {
		return err
	}
	str := func(v any) string {
		switch t := v.(type) {
		case nil:
			return ""
		case string:
			return t
		default:
			return fmt.Sprint(t)
		}
	}
	e.From, e.To = str(raw["from"]), str(raw["to"])
	on, ok := raw["on"]
	if !ok {
		on = raw["true"]
	}
	e.On = str(on)
	return nil
}

// HookRef is one entry of an entry/exit chain: a bare hook name, or a
// mapping {hook, with, blocking, timeout}.
type HookRef struct {
	Hook string `yaml:"hook" json:"hook"`
	With Values `yaml:"with" json:"with,omitempty"`
	// Blocking turns a failed integration call (data.error) into a block
	// instead of a recorded degradation.
	Blocking bool `yaml:"blocking" json:"blocking,omitempty"`
	// Timeout overrides the hook's deadline, e.g. "45s".
	Timeout string `yaml:"timeout" json:"timeout,omitempty"`
}

// UnmarshalYAML accepts the bare-string and mapping forms.
func (h *HookRef) UnmarshalYAML(unmarshal func(any) error) error {
	var name string
	if err := unmarshal(&name); err == nil {
		*h = HookRef{Hook: name}
		return nil
	}
	var p struct {
		Hook     string `yaml:"hook"`
		With     any    `yaml:"with"`
		Blocking bool   `yaml:"blocking"`
		Timeout  any    `yaml:"timeout"`
	}
	if err := unmarshal(&p); err != nil {
		return err
	}
	*h = HookRef{Hook: p.Hook, With: AsValues(p.With), Blocking: p.Blocking}
	if p.Timeout != nil {
		h.Timeout = fmt.Sprint(p.Timeout)
	}
	return nil
}

// StringList is a YAML value that may be a single string or a list.
type StringList []string

// UnmarshalYAML accepts a string or a list of strings.
func (s *StringList) UnmarshalYAML(unmarshal func(any) error) error {
	var one string
	if err := unmarshal(&one); err == nil {
		if one == "" {
			*s = nil
		} else {
			*s = StringList{one}
		}
		return nil
	}
	var many []string
	if err := unmarshal(&many); err != nil {
		return err
	}
	*s = many
	return nil
}

// Position is a 1-based line and column in a graph file.
type Position struct {
	Line, Column int
}

// positionOf finds the source position of a path such as "nodes[3].exit[0]"
// (empty = the document). It returns the zero Position when unknown.
func (f *File) positionOf(path string) Position {
	if f == nil || f.ast == nil {
		return Position{}
	}
	p := "$"
	if path != "" {
		p = "$." + path
	}
	yp, err := yaml.PathString(p)
	if err != nil {
		return Position{}
	}
	n, err := yp.FilterFile(f.ast)
	if err != nil || n == nil {
		return Position{}
	}
	tk := n.GetToken()
	if tk == nil || tk.Position == nil {
		return Position{}
	}
	// For a mapping, point at its first key rather than the value start.
	return Position{Line: tk.Position.Line, Column: tk.Position.Column}
}

// where renders "<source>:<line>:<col>" for path, degrading gracefully.
func (f *File) where(path string) string {
	src := "graph"
	if f != nil && f.Source != "" {
		src = f.Source
	}
	pos := f.positionOf(path)
	if pos.Line == 0 {
		return src
	}
	return fmt.Sprintf("%s:%d:%d", src, pos.Line, pos.Column)
}

// splitAlternatives splits a produces entry "a.md|b.md" into its names,
// trimming each and dropping empty parts.
func splitAlternatives(entry string) []string {
	parts := strings.Split(entry, "|")
	out := parts[:0]
	for _, p := range parts {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// hasEmptyAlternative reports whether entry has an empty part ("a||b",
// "|a", "a|", "|").
func hasEmptyAlternative(entry string) bool {
	for _, p := range strings.Split(entry, "|") {
		if strings.TrimSpace(p) == "" {
			return true
		}
	}
	return false
}
