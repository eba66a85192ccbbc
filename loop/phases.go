package loop

import (
	"fmt"
	"slices"
	"strings"

	"github.com/theloop-dev/theloop/graph"
)

// NotStartedPhase is the phase the-loop's workflow.phases lists for a work
// item that has not entered the graph yet. No node can declare it, so it is
// never a divergence.
const NotStartedPhase = "not-started"

// PhaseWarnings compares the repository's workflow.phases with the phases
// the graph's nodes declare (R9.3). The graph is authoritative and the list
// is derived from it: theloop never reads the list to decide anything, it
// only says where the two disagree, naming each differing phase — listed
// but declared by no node, declared but not listed, or listed in another
// order than the graph declares them. No workflow.phases, or a list that
// matches, returns nothing.
//
// The list describes the outer loop a work item walks: compare it with the
// work-item loop (or a graph an author runs in its place), not with the
// PR, ad-hoc or contribution loops, which declare a subset on purpose
// (see PhaseGraph).
func (h HarnessConfig) PhaseWarnings(g *graph.Graph) []string {
	if h.Phases == nil || g == nil {
		return nil
	}
	var declared []string
	for _, n := range g.Nodes() {
		if n.Phase != "" && !slices.Contains(declared, n.Phase) {
			declared = append(declared, n.Phase)
		}
	}
	var listed []string
	for _, p := range h.Phases {
		if p = strings.TrimSpace(p); p != "" && p != NotStartedPhase && !slices.Contains(listed, p) {
			listed = append(listed, p)
		}
	}
	var extra, missing, common, order []string
	for _, p := range listed {
		if slices.Contains(declared, p) {
			common = append(common, p)
		} else {
			extra = append(extra, p)
		}
	}
	for _, p := range declared {
		if !slices.Contains(listed, p) {
			missing = append(missing, p)
		} else {
			order = append(order, p)
		}
	}
	var diffs []string
	if len(extra) > 0 {
		diffs = append(diffs, "listed but declared by no node: "+strings.Join(extra, ", "))
	}
	if len(missing) > 0 {
		diffs = append(diffs, "declared by the graph but not listed: "+strings.Join(missing, ", "))
	}
	if !slices.Equal(common, order) {
		diffs = append(diffs, "listed in another order than the graph declares them ("+strings.Join(order, ", ")+")")
	}
	if len(diffs) == 0 {
		return nil
	}
	file := h.Path
	if file == "" {
		file = HarnessConfigFile
	}
	name := g.Name
	if name == "" {
		name = g.Source
	}
	return []string{fmt.Sprintf("%s: workflow.phases differs from the phases of graph %s, which is authoritative (the list is derived from it): %s — remove workflow.phases or make it match the graph",
		file, name, strings.Join(diffs, "; "))}
}

// PhaseGraph reports whether workflow.phases describes g: every graph but
// the shipped loops that declare a subset of the phases on purpose (the PR,
// ad-hoc and contribution loops).
func PhaseGraph(g *graph.Graph) bool {
	if g == nil {
		return false
	}
	switch g.Name {
	case PRLoop, AdhocLoop, ContributionLoop:
		return false
	}
	return true
}
