package graph

// Path finding over a compiled graph, for static verification. Only edges
// that can be taken count (the first declared edge per node and outcome).

// takenEdges returns, per node, the targets of its takeable edges in
// declaration order.
func (g *Graph) takenEdges() map[string][]string {
	out := map[string][]string{}
	for _, e := range g.edges {
		if g.next[[2]string{e.From, e.On}] == e.To {
			out[e.From] = append(out[e.From], e.To)
		}
	}
	return out
}

// PathAvoiding returns a shortest path (node ids, both ends included) from
// any node in from to any node in to that does not pass through avoid, or
// nil when there is none. A from node that is itself in to is a path of one.
func (g *Graph) PathAvoiding(from []string, to map[string]bool, avoid string) []string {
	adj := g.takenEdges()
	prev := map[string]string{}
	seen := map[string]bool{}
	var queue []string
	for _, f := range from {
		if f == avoid || seen[f] {
			continue
		}
		seen[f] = true
		queue = append(queue, f)
	}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		if to[n] {
			path := []string{n}
			for p, ok := prev[n]; ok; p, ok = prev[p] {
				path = append([]string{p}, path...)
			}
			return path
		}
		for _, m := range adj[n] {
			if m == avoid || seen[m] {
				continue
			}
			seen[m] = true
			prev[m] = n
			queue = append(queue, m)
		}
	}
	return nil
}

// ReachableAvoiding returns every node reachable from start (included)
// without passing through avoid.
func (g *Graph) ReachableAvoiding(start, avoid string) map[string]bool {
	adj := g.takenEdges()
	seen := map[string]bool{}
	if start == avoid {
		return seen
	}
	seen[start] = true
	queue := []string{start}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		for _, m := range adj[n] {
			if m != avoid && !seen[m] {
				seen[m] = true
				queue = append(queue, m)
			}
		}
	}
	return seen
}

// Predecessors returns every node that can reach target without passing
// through target itself (target excluded).
func (g *Graph) Predecessors(target string) map[string]bool {
	rev := map[string][]string{}
	for from, tos := range g.takenEdges() {
		for _, to := range tos {
			rev[to] = append(rev[to], from)
		}
	}
	seen := map[string]bool{}
	queue := []string{target}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		for _, p := range rev[n] {
			if p != target && !seen[p] {
				seen[p] = true
				queue = append(queue, p)
			}
		}
	}
	return seen
}
