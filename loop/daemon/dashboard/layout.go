package dashboard

import (
	"fmt"
	"sort"

	"github.com/theloop-dev/theloop/graph"
)

// Mark is how the graph picture marks a node for one work item.
type Mark string

// Node marks.
const (
	MarkPending Mark = "pending"
	MarkPassed  Mark = "passed"
	MarkSkipped Mark = "skipped"
	MarkCurrent Mark = "current"
	MarkBlocked Mark = "blocked"
)

// Picture geometry (SVG user units).
const (
	nodeW   = 176
	nodeH   = 40
	gapX    = 36
	gapY    = 46
	marginX = 24
	marginY = 20
	// maxColumnHeight bounds a column of layers (the picture's height).
	maxColumnHeight = 700
	// columnGap separates columns; laneW is one back edge's lane.
	columnGap = 64
	laneW     = 12
)

// picture is a laid-out graph, ready for the template.
type picture struct {
	Width, Height int
	Nodes         []picNode
	Edges         []picEdge
	// Engine says which layout drew the picture (engineGraphviz or
	// engineBuiltIn).
	Engine string
}

type picNode struct {
	ID, Phase   string
	X, Y, W, H  int
	TX, TY, PY  int
	Mark        Mark
	Human       bool
	Terminal    bool
	Title       string
	ShortID     string
	ShortPhase  string
	MarkedClass string
}

type picEdge struct {
	D     string
	Label string
	LX    int
	LY    int
	Back  bool
	Taken bool
	// Lines are the label drawn whole, one outcome a line.
	Lines []labelLine
	// From and To are the node ids the edge joins.
	From, To string
}

// labelLine is one line of an edge label; Mid centres it on X.
type labelLine struct {
	X, Y int
	Text string
	Mid  bool
}

// layoutGraph draws g as layers top to bottom, wrapped into columns left
// to right (see below): a node's layer is the
// longest path to it from the start over the graph's forward edges (edges
// that close a cycle, found by a depth-first walk from the start in
// declaration order, are drawn as back edges on the right), nodes within a
// layer are ordered by one barycentre pass over their parents' positions.
// Deterministic: the same graph and marks give the same picture.
func layoutGraph(g *graph.Graph, marks map[string]Mark) picture {
	nodes := g.Nodes()
	es := edgesOf(g)
	succ, labels, edgeOrder, back := es.succ, es.labels, es.order, es.back

	// Longest-path layering over forward edges (topological order by Kahn).
	indeg := make([]int, len(nodes))
	for _, k := range edgeOrder {
		if !back[k] && k.from != k.to {
			indeg[k.to]++
		}
	}
	layer := make([]int, len(nodes))
	var queue []int
	for i := range nodes {
		if indeg[i] == 0 {
			queue = append(queue, i)
		}
	}
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		for _, v := range succ[u] {
			if back[edgeKey{u, v}] || u == v {
				continue
			}
			if layer[u]+1 > layer[v] {
				layer[v] = layer[u] + 1
			}
			indeg[v]--
			if indeg[v] == 0 {
				queue = append(queue, v)
			}
		}
	}
	maxLayer := 0
	for _, l := range layer {
		maxLayer = max(maxLayer, l)
	}
	rows := make([][]int, maxLayer+1)
	for i := range nodes {
		rows[layer[i]] = append(rows[layer[i]], i)
	}
	// One barycentre pass, top-down.
	pos := make([]float64, len(nodes))
	parents := make([][]int, len(nodes))
	for _, k := range edgeOrder {
		if !back[k] && k.from != k.to {
			parents[k.to] = append(parents[k.to], k.from)
		}
	}
	for li, row := range rows {
		if li > 0 {
			bary := make(map[int]float64, len(row))
			for _, v := range row {
				if len(parents[v]) == 0 {
					bary[v] = float64(v) / 1000
					continue
				}
				sum := 0.0
				for _, p := range parents[v] {
					sum += pos[p]
				}
				bary[v] = sum / float64(len(parents[v]))
			}
			sort.SliceStable(row, func(a, b int) bool {
				if bary[row[a]] != bary[row[b]] {
					return bary[row[a]] < bary[row[b]]
				}
				return row[a] < row[b]
			})
		}
		for j, v := range row {
			pos[v] = float64(j) - float64(len(row)-1)/2
		}
	}
	// Layers run top to bottom in columns of at most perColumn layers,
	// the columns left to right (a newspaper layout): the shipped loops
	// are long chains, and one column of them is ~1,900 px tall, the
	// current node off screen at the later gates; wrapped, the whole
	// loop fits a 1400×900 window.
	perColumn := max(1, (maxColumnHeight-2*marginY+gapY)/(nodeH+gapY))
	ncols := (len(rows) + perColumn - 1) / perColumn
	colWidest := make([]int, ncols)
	for li, row := range rows {
		colWidest[li/perColumn] = max(colWidest[li/perColumn], len(row), 1)
	}
	backLanes := make([]int, ncols) // back edges leaving each column
	for k := range back {
		if c := layer[k.from] / perColumn; c < ncols {
			backLanes[c]++
		}
	}
	colLeft := make([]int, ncols)
	x := marginX
	for c := range ncols {
		colLeft[c] = x
		x += colWidest[c]*nodeW + (colWidest[c]-1)*gapX + backLanes[c]*laneW + columnGap
	}
	pic := picture{
		Width:  x - columnGap + 110,
		Height: 2*marginY + min(len(rows), perColumn)*nodeH + (min(len(rows), perColumn)-1)*gapY,
	}
	colRight := func(c int) int { return colLeft[c] + colWidest[c]*nodeW + (colWidest[c]-1)*gapX }
	xy := make([][2]int, len(nodes))
	for li, row := range rows {
		c := li / perColumn
		center := colLeft[c] + (colWidest[c]*nodeW+(colWidest[c]-1)*gapX)/2
		for _, v := range row {
			x := center + int(pos[v]*float64(nodeW+gapX)) - nodeW/2
			y := marginY + (li%perColumn)*(nodeH+gapY)
			xy[v] = [2]int{x, y}
		}
	}
	for i, n := range nodes {
		pic.Nodes = append(pic.Nodes, nodePicture(n, marks, xy[i][0], xy[i][1]))
	}
	lanes := make([]int, ncols)
	for _, k := range edgeOrder {
		if k.from == k.to {
			continue
		}
		a, b := xy[k.from], xy[k.to]
		label := clip(joinLabels(labels[k]), 22)
		taken := taken(marks, nodes[k.from].ID, nodes[k.to].ID)
		if back[k] {
			c := layer[k.from] / perColumn
			lanes[c]++
			rx := colRight(c) + lanes[c]*laneW
			x1, y1 := a[0]+nodeW, a[1]+nodeH/2
			x2, y2 := b[0]+nodeW, b[1]+nodeH/2
			d := fmt.Sprintf("M%d %d C%d %d %d %d %d %d", x1, y1, rx, y1, rx, y2, x2+6, y2)
			pic.Edges = append(pic.Edges, picEdge{D: d, Label: label, LX: rx + 4, LY: (y1 + y2) / 2, Back: true, Taken: taken, From: nodes[k.from].ID, To: nodes[k.to].ID})
			continue
		}
		x1, y1 := a[0]+nodeW/2, a[1]+nodeH
		x2, y2 := b[0]+nodeW/2, b[1]-6
		if layer[k.from]/perColumn != layer[k.to]/perColumn {
			// Into the next column: out of the bottom, into the top.
			d := fmt.Sprintf("M%d %d C%d %d %d %d %d %d", x1, y1, x1, y1+gapY, x2, y2-gapY, x2, y2)
			pic.Edges = append(pic.Edges, picEdge{D: d, Label: label, LX: (x1+x2)/2 + 4, LY: (y1 + y2) / 2, Taken: taken, From: nodes[k.from].ID, To: nodes[k.to].ID})
			continue
		}
		my := (y1 + y2) / 2
		d := fmt.Sprintf("M%d %d C%d %d %d %d %d %d", x1, y1, x1, my, x2, my, x2, y2)
		pic.Edges = append(pic.Edges, picEdge{D: d, Label: label, LX: (x1+x2)/2 + 4, LY: my, Taken: taken, From: nodes[k.from].ID, To: nodes[k.to].ID})
	}
	return pic
}

// edgeKey is one drawn edge: the graph's edges between the same two nodes
// are drawn as one, labelled with every outcome.
type edgeKey struct{ from, to int }

// edgeSet is the graph's edges as both layouts draw them.
type edgeSet struct {
	index  map[string]int
	succ   [][]int
	labels map[edgeKey][]string
	order  []edgeKey
	// back holds the edges that close a cycle, found by a depth-first walk
	// from the start in declaration order (drawn dashed).
	back map[edgeKey]bool
}

func edgesOf(g *graph.Graph) edgeSet {
	nodes := g.Nodes()
	es := edgeSet{index: make(map[string]int, len(nodes)), succ: make([][]int, len(nodes)), labels: map[edgeKey][]string{}, back: map[edgeKey]bool{}}
	for i, n := range nodes {
		es.index[n.ID] = i
	}
	for _, e := range g.Edges() {
		f, okf := es.index[e.From]
		t, okt := es.index[e.To]
		if !okf || !okt {
			continue
		}
		k := edgeKey{f, t}
		if _, seen := es.labels[k]; !seen {
			es.order = append(es.order, k)
			es.succ[f] = append(es.succ[f], t)
		}
		es.labels[k] = append(es.labels[k], e.On)
	}
	color := make([]int, len(nodes)) // 0 white, 1 on stack, 2 done
	var dfs func(int)
	dfs = func(u int) {
		color[u] = 1
		for _, v := range es.succ[u] {
			switch color[v] {
			case 0:
				dfs(v)
			case 1:
				es.back[edgeKey{u, v}] = true
			}
		}
		color[u] = 2
	}
	if s, ok := es.index[g.Start]; ok {
		dfs(s)
	}
	for i := range nodes {
		if color[i] == 0 {
			dfs(i)
		}
	}
	return es
}

// nodePicture is n's box at x, y with its text, title and mark.
func nodePicture(n *graph.Node, marks map[string]Mark, x, y int) picNode {
	m := marks[n.ID]
	if m == "" {
		m = MarkPending
	}
	title := n.ID
	if n.Phase != "" {
		title += " (" + n.Phase + ")"
	}
	if n.IsHuman() {
		title += " — human gate"
	}
	title += " — " + string(m)
	return picNode{
		ID: n.ID, Phase: n.Phase, X: x, Y: y, W: nodeW, H: nodeH,
		TX: x + nodeW/2, TY: y + 17, PY: y + 32,
		Mark: m, Human: n.IsHuman(), Terminal: n.Terminal, Title: title,
		ShortID: clip(n.ID, 24), ShortPhase: clip(phaseLabel(n), 28),
	}
}

// taken reports whether the work item went along the edge from → to.
func taken(marks map[string]Mark, from, to string) bool {
	return marks[from] == MarkPassed && marks[to] != MarkPending && marks[to] != MarkSkipped
}

// phaseLabel is the node's phase when it says more than the id.
func phaseLabel(n *graph.Node) string {
	if n.Phase == n.ID {
		return ""
	}
	return n.Phase
}

func joinLabels(ls []string) string {
	out := ""
	for i, l := range ls {
		if i > 0 {
			out += "|"
		}
		out += l
	}
	return out
}

// clip shortens s to n runes with an ellipsis.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// marksFor derives each node's mark from the work item's state: the
// current node is current (blocked when its last evaluation blocked or it
// is parked off a human gate); nodes declared skipped or exited with the
// skipped outcome are skipped; nodes exited otherwise are passed.
func marksFor(g *graph.Graph, st *graph.State) map[string]Mark {
	m := map[string]Mark{}
	if g == nil || st == nil {
		return m
	}
	for _, n := range g.Nodes() {
		rec := st.Record(n.ID)
		_, declared := st.Skips.Get(n.ID)
		switch {
		case declared || rec.Outcome == graph.OutcomeSkipped:
			m[n.ID] = MarkSkipped
		case rec.ExitedAt != "":
			m[n.ID] = MarkPassed
		}
	}
	if cur := st.CurrentNode; cur != "" {
		rec := st.Record(cur)
		n, _ := g.Node(cur)
		blocked := rec.LastBlock != "" || (st.Parked != nil && st.Parked.Node == cur && (n == nil || !n.IsHuman() || st.Parked.Escalated))
		if n != nil && n.Terminal && rec.ExitedAt != "" {
			m[cur] = MarkPassed
		} else if blocked {
			m[cur] = MarkBlocked
		} else {
			m[cur] = MarkCurrent
		}
	}
	return m
}
