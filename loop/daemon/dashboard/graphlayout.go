package dashboard

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/theloop-dev/theloop/graph"
)

// Layouter lays out a graph written in DOT and returns Graphviz's json0
// rendering of the layout. The daemon's runs the loop-layout program
// (package dotlayout says why the engine is not linked into loopd); nil
// leaves the dashboard's built-in layout (layout.go).
type Layouter interface {
	Layout(ctx context.Context, dot []byte) ([]byte, error)
}

// Engines named on the picture (its data-engine attribute and legend).
const (
	engineGraphviz = "graphviz"
	engineBuiltIn  = "built-in"
)

// Graphviz geometry: the node box in inches (72 points each; one SVG user
// unit is one point), the margin around the drawing.
const (
	gvNodeW   = float64(nodeW) / 72
	gvNodeH   = float64(nodeH) / 72
	gvMargin  = 16
	lineH     = 12 // an edge label's line height (svg .elabel is 10px)
	maxLayout = 4 << 20
	// layoutTimeout bounds one run of the layout program; failedFor is how
	// long a graph whose layout failed is drawn by the built-in layout
	// before the program is tried again.
	layoutTimeout = 30 * time.Second
	failedFor     = time.Minute
	// maxCachedLayouts bounds the cache: one entry per distinct graph
	// (the shipped loops and the frozen selections of them).
	maxCachedLayouts = 64
)

// gvLayout is a graph's layout, before a work item's marks are applied:
// what the cache keeps per graph hash.
type gvLayout struct {
	width, height int
	nodes         map[string]gvBox
	edges         map[edgeKey]gvEdge
	failedAt      time.Time
}

type gvBox struct{ x, y, w, h float64 }

type gvEdge struct {
	d      string
	lx, ly float64
	hasLP  bool
}

// layoutCache lays a graph out once per hash, on the first page that
// shows it; one layout runs at a time.
type layoutCache struct {
	engine Layouter
	now    func() time.Time
	log    io.Writer

	run sync.Mutex // one layout program at a time
	mu  sync.Mutex
	m   map[[32]byte]*gvLayout
}

func newLayoutCache(engine Layouter, now func() time.Time, log io.Writer) *layoutCache {
	return &layoutCache{engine: engine, now: now, log: log, m: map[[32]byte]*gvLayout{}}
}

// picture lays g out with the engine (cached per graph hash) and applies
// marks; without an engine, or when it failed, the built-in layout draws it.
func (c *layoutCache) picture(ctx context.Context, g *graph.Graph, marks map[string]Mark) picture {
	if c == nil || c.engine == nil {
		return builtInPicture(g, marks)
	}
	dot := graphDOT(g)
	key := sha256.Sum256(dot)
	l := c.lookup(key)
	if l == nil {
		c.run.Lock()
		if l = c.lookup(key); l == nil {
			l = c.layout(ctx, g, dot)
			c.store(key, l)
		}
		c.run.Unlock()
	}
	if !l.failedAt.IsZero() {
		return builtInPicture(g, marks)
	}
	return l.picture(g, marks)
}

func (c *layoutCache) lookup(key [32]byte) *gvLayout {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.m[key]
	if l != nil && !l.failedAt.IsZero() && c.now().Sub(l.failedAt) > failedFor {
		delete(c.m, key)
		return nil
	}
	return l
}

func (c *layoutCache) store(key [32]byte, l *gvLayout) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= maxCachedLayouts {
		for k := range c.m { // any one: the set of graphs is small
			delete(c.m, k)
			break
		}
	}
	c.m[key] = l
}

func (c *layoutCache) layout(ctx context.Context, g *graph.Graph, dot []byte) *gvLayout {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), layoutTimeout)
	defer cancel()
	out, err := c.engine.Layout(ctx, dot)
	var l *gvLayout
	if err == nil {
		l, err = parseLayout(out, g)
	}
	if err != nil {
		fmt.Fprintf(c.log, "dashboard: laying out graph %s with Graphviz failed (drawn by the built-in layout for %s): %v\n", g.Name, failedFor, err)
		return &gvLayout{failedAt: c.now()}
	}
	return l
}

func builtInPicture(g *graph.Graph, marks map[string]Mark) picture {
	p := layoutGraph(g, marks)
	p.Engine = engineBuiltIn
	for i := range p.Edges {
		if e := &p.Edges[i]; e.Label != "" {
			e.Lines = []labelLine{{X: e.LX, Y: e.LY, Text: e.Label}}
		}
	}
	return p
}

// graphDOT writes g for the dot engine: fixed-size boxes (the dashboard
// draws their text), one edge per pair of nodes labelled with every
// outcome, one outcome a line. Node ids and outcomes are quoted; nothing
// else of the graph reaches the engine.
func graphDOT(g *graph.Graph) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "digraph loop {\ngraph [rankdir=TB, nodesep=0.4, ranksep=0.5, splines=true, margin=0];\n")
	fmt.Fprintf(&b, "node [shape=box, fixedsize=true, width=%.4f, height=%.4f, label=\"\"];\n", gvNodeW, gvNodeH)
	b.WriteString("edge [fontname=Helvetica, fontsize=10];\n")
	for _, n := range g.Nodes() {
		b.WriteString(dotQuote(n.ID) + ";\n")
	}
	es := edgesOf(g)
	nodes := g.Nodes()
	for _, k := range es.order {
		fmt.Fprintf(&b, "%s -> %s [label=%s];\n", dotQuote(nodes[k.from].ID), dotQuote(nodes[k.to].ID), dotQuote(strings.Join(es.labels[k], "\n")))
	}
	b.WriteString("}\n")
	return []byte(b.String())
}

// dotQuote quotes s as a DOT string: a backslash and a quote are escaped,
// so that Graphviz reads none of its label escapes (\N, \G, \l) in it; a
// newline becomes the \n line break.
func dotQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '\\':
			b.WriteString(`\\`)
		case '"':
			b.WriteString(`\"`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// json0 is the part of Graphviz's json0 output the picture uses.
type json0 struct {
	BB      string `json:"bb"`
	Objects []struct {
		GVID   int    `json:"_gvid"`
		Name   string `json:"name"`
		Pos    string `json:"pos"`
		Width  string `json:"width"`
		Height string `json:"height"`
	} `json:"objects"`
	Edges []struct {
		Tail int    `json:"tail"`
		Head int    `json:"head"`
		Pos  string `json:"pos"`
		LP   string `json:"lp"`
	} `json:"edges"`
}

// maxCoord bounds a coordinate the picture accepts (points): far beyond
// any real layout, well inside what a float formats exactly.
const maxCoord = 1e6

// parseLayout reads the engine's json0 output for g. The output comes from
// a program we run on our own input, but it is parsed as outside input:
// bounded, every number checked, every node of g required, nothing else
// of it kept.
func parseLayout(out []byte, g *graph.Graph) (*gvLayout, error) {
	if len(out) > maxLayout {
		return nil, fmt.Errorf("the layout is %d bytes, more than %d", len(out), maxLayout)
	}
	var j json0
	if err := json.Unmarshal(out, &j); err != nil {
		return nil, fmt.Errorf("reading the layout: %w", err)
	}
	bb, err := floats(j.BB, ",", 4)
	if err != nil {
		return nil, fmt.Errorf("the layout's bounding box %q: %w", j.BB, err)
	}
	l := &gvLayout{nodes: map[string]gvBox{}, edges: map[edgeKey]gvEdge{}}
	// Splines may bow out of the bounding box a little: the picture spans
	// both, plus a margin.
	minX, minY, maxX, maxY := bb[0], bb[1], bb[2], bb[3]
	names := map[int]string{}
	for _, o := range j.Objects {
		c, err := floats(o.Pos, ",", 2)
		if err != nil {
			return nil, fmt.Errorf("node %q's position %q: %w", o.Name, o.Pos, err)
		}
		w, err1 := strconv.ParseFloat(o.Width, 64)
		h, err2 := strconv.ParseFloat(o.Height, 64)
		if err := errors.Join(err1, err2); err != nil || !finite(w*72) || !finite(h*72) || w <= 0 || h <= 0 {
			return nil, fmt.Errorf("node %q's size %q×%q is not a size", o.Name, o.Width, o.Height)
		}
		box := gvBox{x: c[0] - w*36, y: c[1] + h*36, w: w * 72, h: h * 72} // y: the top, Graphviz's y grows upwards
		l.nodes[o.Name] = box
		names[o.GVID] = o.Name
		minX, maxX = math.Min(minX, box.x), math.Max(maxX, box.x+box.w)
		minY, maxY = math.Min(minY, box.y-box.h), math.Max(maxY, box.y)
	}
	es := edgesOf(g)
	nodes := g.Nodes()
	for _, n := range nodes {
		if _, ok := l.nodes[n.ID]; !ok {
			return nil, fmt.Errorf("the layout has no node %q", n.ID)
		}
	}
	type rawEdge struct {
		pts    [][2]float64
		end    *[2]float64
		lp     []float64
		key    edgeKey
		hasKey bool
	}
	var raws []rawEdge
	for _, e := range j.Edges {
		from, to := names[e.Tail], names[e.Head]
		f, okf := es.index[from]
		t, okt := es.index[to]
		if !okf || !okt {
			continue
		}
		r := rawEdge{key: edgeKey{f, t}, hasKey: true}
		pts, end, err := splinePoints(e.Pos)
		if err != nil {
			return nil, fmt.Errorf("edge %s → %s: %w", from, to, err)
		}
		r.pts, r.end = pts, end
		if e.LP != "" {
			if r.lp, err = floats(e.LP, ",", 2); err != nil {
				return nil, fmt.Errorf("edge %s → %s's label position %q: %w", from, to, e.LP, err)
			}
		}
		for _, p := range pts {
			minX, maxX = math.Min(minX, p[0]), math.Max(maxX, p[0])
			minY, maxY = math.Min(minY, p[1]), math.Max(maxY, p[1])
		}
		raws = append(raws, r)
	}
	// SVG coordinates: x from the left margin, y downwards from the top.
	X := func(x float64) float64 { return x - minX + gvMargin }
	Y := func(y float64) float64 { return maxY - y + gvMargin }
	for id, b := range l.nodes {
		l.nodes[id] = gvBox{x: X(b.x), y: Y(b.y), w: b.w, h: b.h}
	}
	for _, r := range raws {
		var d strings.Builder
		fmt.Fprintf(&d, "M%.1f %.1f", X(r.pts[0][0]), Y(r.pts[0][1]))
		for i := 1; i+2 < len(r.pts); i += 3 {
			fmt.Fprintf(&d, " C%.1f %.1f %.1f %.1f %.1f %.1f", X(r.pts[i][0]), Y(r.pts[i][1]), X(r.pts[i+1][0]), Y(r.pts[i+1][1]), X(r.pts[i+2][0]), Y(r.pts[i+2][1]))
		}
		if r.end != nil {
			fmt.Fprintf(&d, " L%.1f %.1f", X(r.end[0]), Y(r.end[1]))
		}
		e := gvEdge{d: d.String()}
		if r.lp != nil {
			e.lx, e.ly, e.hasLP = X(r.lp[0]), Y(r.lp[1]), true
		}
		l.edges[r.key] = e
	}
	l.width = int(math.Ceil(maxX-minX)) + 2*gvMargin
	l.height = int(math.Ceil(maxY-minY)) + 2*gvMargin
	return l, nil
}

// splinePoints reads an edge's pos: optional "s,x,y" and "e,x,y" ends,
// then the B-spline's 3n+1 control points.
func splinePoints(pos string) (pts [][2]float64, end *[2]float64, err error) {
	fields := strings.Fields(pos)
	if len(fields) > 10_000 {
		return nil, nil, errors.New("too many spline points")
	}
	for _, f := range fields {
		switch {
		case strings.HasPrefix(f, "e,"):
			p, err := floats(f[2:], ",", 2)
			if err != nil {
				return nil, nil, fmt.Errorf("end point %q: %w", f, err)
			}
			end = &[2]float64{p[0], p[1]}
		case strings.HasPrefix(f, "s,"):
			// The start arrow's point: the picture draws no start arrows.
		default:
			p, err := floats(f, ",", 2)
			if err != nil {
				return nil, nil, fmt.Errorf("spline point %q: %w", f, err)
			}
			pts = append(pts, [2]float64{p[0], p[1]})
		}
	}
	if len(pts) < 4 || (len(pts)-1)%3 != 0 {
		return nil, nil, fmt.Errorf("a spline has 3n+1 control points, not %d", len(pts))
	}
	return pts, end, nil
}

// floats parses exactly n finite numbers separated by sep.
func floats(s, sep string, n int) ([]float64, error) {
	parts := strings.Split(s, sep)
	if len(parts) != n {
		return nil, fmt.Errorf("want %d numbers", n)
	}
	out := make([]float64, n)
	for i, p := range parts {
		v, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || !finite(v) {
			return nil, fmt.Errorf("%q is not a number", p)
		}
		out[i] = v
	}
	return out, nil
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) && math.Abs(v) <= maxCoord }

// picture draws the layout with a work item's marks (the node text and
// marks as the built-in layout draws them).
func (l *gvLayout) picture(g *graph.Graph, marks map[string]Mark) picture {
	p := picture{Width: l.width, Height: l.height, Engine: engineGraphviz}
	es := edgesOf(g)
	nodes := g.Nodes()
	for _, n := range nodes {
		b := l.nodes[n.ID]
		pn := nodePicture(n, marks, int(math.Round(b.x)), int(math.Round(b.y)))
		pn.W, pn.H = int(math.Round(b.w)), int(math.Round(b.h))
		pn.TX, pn.TY, pn.PY = pn.X+pn.W/2, pn.Y+pn.H/2-3, pn.Y+pn.H/2+12
		p.Nodes = append(p.Nodes, pn)
	}
	for _, k := range es.order {
		e, ok := l.edges[k]
		if !ok {
			continue
		}
		pe := picEdge{D: e.d, Back: es.back[k], Taken: taken(marks, nodes[k.from].ID, nodes[k.to].ID), Label: strings.Join(es.labels[k], "|"), From: nodes[k.from].ID, To: nodes[k.to].ID}
		if e.hasLP {
			ls := es.labels[k]
			top := e.ly - float64(len(ls)-1)*lineH/2 + 3.5 // baseline of a 10px line centred on lp
			for i, s := range ls {
				pe.Lines = append(pe.Lines, labelLine{X: int(math.Round(e.lx)), Y: int(math.Round(top + float64(i)*lineH)), Text: s, Mid: true})
			}
		}
		p.Edges = append(p.Edges, pe)
	}
	return p
}
