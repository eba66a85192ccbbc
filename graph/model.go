package graph

import (
	"fmt"
	"strings"
)

// File is a graph file as written: the YAML model before compilation.
// Field names follow the-loop's graph format (docs/graph.md §2).
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
	// Positions locates an element path such as "nodes[3].exit[0]" as
	// "<file>:<line>:<col>" (set by the YAML reader; nil otherwise).
	Positions func(path string) string `yaml:"-" json:"-"`
	// SkipSetOrder is the order skipSets were written in (maps forget it).
	SkipSetOrder []string `yaml:"-" json:"skipSetOrder,omitempty"`
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
	// Blocking turns a failed integration call (HookResult.Degraded) into a block
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

// where renders an element path's location, "<source>:<line>:<col>" when
// the file was read with positions, else the source name.
func (f *File) where(path string) string {
	if f != nil && f.Positions != nil {
		return f.Positions(path)
	}
	if f != nil && f.Source != "" {
		return f.Source
	}
	return "graph"
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
