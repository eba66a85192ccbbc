package dashboard

import (
	"fmt"
	"math"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/loop"
)

// metricsWindow is how far back the metrics page reads the event log, and
// maxMetricEvents bounds what it reads.
const (
	metricsWindow   = 30 * 24 * time.Hour
	maxMetricEvents = 200_000
)

// dwellStat is one gate's dwell distribution.
type dwellStat struct {
	Gate     string
	Count    int
	Waiting  int
	P50, P90 time.Duration
}

// blockStat counts blocks by hook.
type blockStat struct {
	Hook  string
	Count int
}

type bar struct {
	Label         string
	Y, Y2, W1, W2 int
	LY            int
	Text1         string
	Text2         string
	TX1, TX2      int
	Title         string
	BarH, Width   int
}

type chart struct {
	Width, Height int
	Bars          []bar
}

type metricsPage struct {
	Title      string
	Dwell      []dwellStat
	DwellChart chart
	Blocks     []blockStat
	BlockChart chart
	Stuck      []row
	Throughput throughputChart
	StuckAfter string
	Events     int
	// Fleet is the usage per day and repository (usage.go; nil: none).
	Fleet *FleetUsage
}

var (
	gateIDsOnce sync.Once
	gateIDs     map[string]bool
	nodePhases  map[string]string
	terminalIDs map[string]bool
)

// humanGates is the set of human-gate node ids of the shipped graphs (the
// event log names nodes, not their kinds).
func humanGates() map[string]bool {
	gateIDsOnce.Do(func() {
		gateIDs, nodePhases, terminalIDs = map[string]bool{}, map[string]string{}, map[string]bool{}
		for _, name := range loop.ShippedLoopNames() {
			g, err := loop.ShippedGraph(name)
			if err != nil {
				continue
			}
			for _, n := range g.Nodes() {
				if n.IsHuman() {
					gateIDs[n.ID] = true
				}
				if n.Terminal {
					terminalIDs[n.ID] = true
				}
				if n.Phase != "" {
					nodePhases[n.ID] = n.Phase
				}
			}
		}
	})
	return gateIDs
}

// throughputDays is how many days the throughput chart shows.
const throughputDays = 14

// throughputRow counts the completions of one node per day.
type throughputRow struct {
	Node, Phase string
	Total       int
	Counts      []int
	Cells       []cell
	TX, LY      int
}

type cell struct {
	X, Y, W, H int
	Title      string
}

type throughputChart struct {
	Width, Height int
	Rows          []throughputRow
	Days          []dayLabel
}

type dayLabel struct {
	X     int
	Label string
}

// throughput counts, per node and UTC day over the last throughputDays
// days up to now, the node's completions: a graph.advanced leaving it, and
// for a terminal node (never left) the item reaching it — its
// graph.completed, or the advance into it, once per item and node. Rows
// are in the order the nodes were first completed (a walk reads top to
// bottom); phases says each node's phase.
func throughput(evs []Event, phases map[string]string, terminal map[string]bool, now time.Time) throughputChart {
	const cellW, rowH, labelW = 22, 26, 220
	today := now.UTC().Truncate(24 * time.Hour)
	first := today.AddDate(0, 0, -(throughputDays - 1))
	byNode := map[string][]int{}
	var order []string
	reached := map[[2]string]bool{} // item, terminal node
	count := func(node string, at time.Time) {
		day := int(at.UTC().Sub(first) / (24 * time.Hour))
		if node == "" || at.Before(first) || day < 0 || day >= throughputDays {
			return
		}
		if byNode[node] == nil {
			byNode[node] = make([]int, throughputDays)
			order = append(order, node)
		}
		byNode[node][day]++
	}
	reach := func(item, node string, at time.Time) {
		if k := [2]string{item, node}; !reached[k] {
			reached[k] = true
			count(node, at)
		}
	}
	for _, e := range evs {
		node, _ := e.Fields["node"].(string)
		switch e.Name {
		case graph.EventAdvanced:
			count(node, e.Time)
			if to, _ := e.Fields["to"].(string); terminal[to] {
				reach(e.WorkItem, to, e.Time)
			}
		case graph.EventCompleted:
			if terminal[node] {
				reach(e.WorkItem, node, e.Time)
			}
		}
	}
	top := 1
	for _, cs := range byNode {
		for _, c := range cs {
			top = max(top, c)
		}
	}
	c := throughputChart{Width: labelW + throughputDays*cellW + 60, Height: 24 + rowH*len(order)}
	for i := 0; i < throughputDays; i += 2 {
		c.Days = append(c.Days, dayLabel{X: labelW + i*cellW, Label: first.AddDate(0, 0, i).Format("01-02")})
	}
	for i, node := range order {
		y := 20 + i*rowH
		r := throughputRow{Node: clip(node, 30), Phase: phases[node], Counts: byNode[node], LY: y + 16, TX: labelW + throughputDays*cellW + 6}
		if r.Phase == node {
			r.Phase = ""
		}
		for d, n := range byNode[node] {
			r.Total += n
			if n == 0 {
				continue
			}
			h := max(2, n*(rowH-6)/top)
			r.Cells = append(r.Cells, cell{X: labelW + d*cellW, Y: y + rowH - 4 - h, W: cellW - 4, H: h,
				Title: fmt.Sprintf("%s: %d on %s", node, n, first.AddDate(0, 0, d).Format("2006-01-02"))})
		}
		c.Rows = append(c.Rows, r)
	}
	return c
}

// gateDwell measures, per gate, how long work items waited there: from
// the event that entered it (graph.started or graph.advanced/forced to it)
// to the graph.advanced that left it. Visits still open count as waiting.
func gateDwell(evs []Event, gates map[string]bool) []dwellStat {
	type key struct{ item, gate string }
	entered := map[key]time.Time{}
	samples := map[string][]time.Duration{}
	enter := func(item, node string, at time.Time) {
		if gates[node] {
			if _, open := entered[key{item, node}]; !open {
				entered[key{item, node}] = at
			}
		}
	}
	for _, e := range evs {
		node, _ := e.Fields["node"].(string)
		to, _ := e.Fields["to"].(string)
		switch e.Name {
		case graph.EventStarted:
			enter(e.WorkItem, node, e.Time)
		case graph.EventForced:
			enter(e.WorkItem, to, e.Time)
		case graph.EventAdvanced:
			k := key{e.WorkItem, node}
			if t, open := entered[k]; open {
				samples[node] = append(samples[node], e.Time.Sub(t))
				delete(entered, k)
			}
			enter(e.WorkItem, to, e.Time)
		}
	}
	waiting := map[string]int{}
	for k := range entered {
		waiting[k.gate]++
	}
	var out []dwellStat
	seen := map[string]bool{}
	for g, s := range samples {
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		out = append(out, dwellStat{Gate: g, Count: len(s), Waiting: waiting[g], P50: percentile(s, 0.5), P90: percentile(s, 0.9)})
		seen[g] = true
	}
	for g, n := range waiting {
		if !seen[g] {
			out = append(out, dwellStat{Gate: g, Waiting: n})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Gate < out[j].Gate })
	return out
}

// percentile is the nearest-rank percentile of sorted samples.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func blocksByHook(evs []Event) []blockStat {
	counts := map[string]int{}
	for _, e := range evs {
		if e.Name != graph.EventBlocked {
			continue
		}
		h, _ := e.Fields["hook"].(string)
		if h == "" {
			h = "(unnamed)"
		}
		counts[h]++
	}
	var out []blockStat
	for h, n := range counts {
		out = append(out, blockStat{Hook: h, Count: n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Hook < out[j].Hook
	})
	return out
}

// Chart geometry.
const (
	chartLabelW = 220
	chartBarW   = 420
	chartRowH   = 30
)

func dwellChart(ds []dwellStat) chart {
	c := chart{Width: chartLabelW + chartBarW + 120, Height: 10 + chartRowH*len(ds)}
	var top time.Duration
	for _, d := range ds {
		top = max(top, d.P90)
	}
	for i, d := range ds {
		y := 6 + i*chartRowH
		c.Bars = append(c.Bars, bar{
			Label: clip(d.Gate, 30), Y: y, Y2: y + 10, LY: y + 16, BarH: 9,
			W1: scale(float64(d.P50), float64(top)), W2: scale(float64(d.P90), float64(top)),
			Text1: "p50 " + humanDuration(d.P50), Text2: "p90 " + humanDuration(d.P90),
			Title: fmt.Sprintf("%s: p50 %s, p90 %s over %d visits, %d waiting now", d.Gate, humanDuration(d.P50), humanDuration(d.P90), d.Count, d.Waiting),
		})
		b := &c.Bars[len(c.Bars)-1]
		b.TX1, b.TX2 = chartLabelW+b.W1+6, chartLabelW+b.W2+6
	}
	return c
}

func blockChart(bs []blockStat) chart {
	c := chart{Width: chartLabelW + chartBarW + 120, Height: 10 + chartRowH*len(bs)}
	top := 0
	for _, b := range bs {
		top = max(top, b.Count)
	}
	for i, b := range bs {
		y := 6 + i*chartRowH
		w := scale(float64(b.Count), float64(top))
		c.Bars = append(c.Bars, bar{Label: clip(b.Hook, 30), Y: y, LY: y + 16, BarH: 18, W1: w, TX1: chartLabelW + w + 6, Text1: fmt.Sprint(b.Count), Title: fmt.Sprintf("%s blocked %d times", b.Hook, b.Count)})
	}
	return c
}

func scale(v, top float64) int {
	if top <= 0 || v <= 0 {
		return 1
	}
	return max(1, int(v/top*chartBarW))
}

// metrics renders gate dwell, stuck items and blocks by hook, with charts
// drawn as inline SVG on the server.
func (d *Dashboard) metrics(w http.ResponseWriter, r *http.Request, _ *session) {
	now := d.deps.Now()
	after := d.cfg.StuckAfter
	if s := r.URL.Query().Get("stuck"); s != "" {
		if v, err := time.ParseDuration(s); err == nil && v > 0 {
			after = v
		}
	}
	evs, err := d.deps.Source.Events(r.Context(), "", now.Add(-metricsWindow), maxMetricEvents)
	if err != nil {
		http.Error(w, "dashboard: reading the event log failed: "+err.Error(), http.StatusInternalServerError)
		return
	}
	items, err := d.deps.Source.Items(r.Context())
	if err != nil {
		http.Error(w, "dashboard: reading the work items failed: "+err.Error(), http.StatusInternalServerError)
		return
	}
	p := metricsPage{Title: "Metrics", StuckAfter: strings.TrimSuffix(after.String(), "0s"), Events: len(evs)}
	p.Dwell = gateDwell(evs, humanGates())
	p.DwellChart = dwellChart(p.Dwell)
	p.Blocks = blocksByHook(evs)
	p.BlockChart = blockChart(p.Blocks)
	p.Throughput = throughput(evs, nodePhases, terminalIDs, now)
	p.Fleet = d.fleetUsage(r.Context())
	for _, it := range items {
		if it.State.Finished() || it.Since.IsZero() || now.Sub(it.Since) < after {
			continue
		}
		p.Stuck = append(p.Stuck, rowData(it, now))
	}
	sort.SliceStable(p.Stuck, func(i, j int) bool { return p.Stuck[i].wait > p.Stuck[j].wait })
	d.render(w, "metrics.html", p)
}
