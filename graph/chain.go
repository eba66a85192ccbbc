package graph

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"
)

// ChainOutcome is the result of running one hook chain.
type ChainOutcome struct {
	// Status is pass when every hook passed or skipped, else the status of
	// the hook that stopped the chain (wait or block).
	Status Status
	// Results holds one result per hook that ran, in chain order.
	Results []HookResult
	// Blocking is the index in Results of the hook that stopped the chain,
	// or -1.
	Blocking int
}

// Satisfied reports whether the chain passed.
func (c ChainOutcome) Satisfied() bool { return c.Status == StatusPass }

// Outcome is the routing outcome: the stopping hook's outcome, else the
// last non-empty Route in chain order (so a gate's verdict survives
// a later bookkeeping hook), else "pass".
func (c ChainOutcome) Outcome() string {
	if c.Blocking >= 0 {
		return c.Results[c.Blocking].Outcome()
	}
	for i := len(c.Results) - 1; i >= 0; i-- {
		if o := c.Results[i].Route; o != "" {
			return o
		}
	}
	return string(StatusPass)
}

// Messages are the stopping hook's messages (none when satisfied).
func (c ChainOutcome) Messages() []Message {
	if c.Blocking < 0 {
		return nil
	}
	return c.Results[c.Blocking].Messages
}

// BlockingHook names the hook that stopped the chain ("" when satisfied).
func (c ChainOutcome) BlockingHook() string {
	if c.Blocking < 0 {
		return ""
	}
	return c.Results[c.Blocking].Hook
}

// Render is "" when satisfied, else "`<hook>` did not pass:" followed by one
// "- <message>" line per message. It is what the runtime stores as a node's
// lastBlock and compares to detect a repeated block.
func (c ChainOutcome) Render() string {
	if c.Blocking < 0 {
		return ""
	}
	r := c.Results[c.Blocking]
	var b strings.Builder
	b.WriteString("`" + r.Hook + "` did not pass:")
	for _, m := range r.Messages {
		b.WriteString("\n- ")
		b.WriteString(m.String())
	}
	return b.String()
}

// Degraded returns the results of hooks that passed but could not complete a
// side effect (HookResult.Degraded set): a channel outage that must be
// visible but must not wedge the graph.
func (c ChainOutcome) Degraded() []HookResult {
	var out []HookResult
	for _, r := range c.Results {
		if r.Degraded != "" && r.Status != StatusBlock {
			out = append(out, r)
		}
	}
	return out
}

// RunChain runs hooks in declared order against base (which it copies per
// hook). The chain stops at the first result that is neither pass nor
// skip. Every hook runs under its deadline; a hook that panics, returns an
// invalid status, or overruns its deadline becomes a non-retriable block. A
// hook reference declared blocking turns a recorded integration failure
// (HookResult.Degraded) into a block.
func RunChain(ctx context.Context, hooks []BoundHook, base *HookContext) ChainOutcome {
	return runChains(ctx, nil, []chainJob{{hooks: hooks, base: base}})[0]
}

// chainJob is one chain to run.
type chainJob struct {
	hooks []BoundHook
	base  *HookContext
	// node, when set, is the node the chain runs for in place of
	// base.Node: a whole-graph check shares one base among its chains.
	node *Node
}

// runChains runs several chains one after another on a single worker
// goroutine while the caller supervises the deadline of whichever hook is
// running with one timer. Handing work to another goroutine once per batch
// — not once per hook — keeps a whole-graph check cheap. A hook that
// overruns is abandoned (its goroutine finishes on its own), its chain ends
// in a block, and the remaining chains continue on a fresh worker.
func runChains(ctx context.Context, pool *workerPool, jobs []chainJob) []ChainOutcome {
	outs, _ := runChainsToEnd(ctx, pool, jobs)
	return outs
}

// runChainsToEnd is runChains that also reports whether every hook
// returned (none was abandoned at its deadline and may still be running).
func runChainsToEnd(ctx context.Context, pool *workerPool, jobs []chainJob) (outs []ChainOutcome, allReturned bool) {
	outs = make([]ChainOutcome, 0, len(jobs))
	allReturned = true
	// Leading empty chains pass without a hand-off.
	for len(outs) < len(jobs) && len(jobs[len(outs)].hooks) == 0 {
		outs = append(outs, ChainOutcome{Status: StatusPass, Blocking: -1})
	}
	for len(outs) < len(jobs) {
		b := newBatch(jobs[len(outs):], ctx)
		pool.run(b.runFn)
		res, finished := b.supervise(ctx)
		outs = append(outs, res...)
		if finished {
			b.recycle()
		} else {
			allReturned = false
		}
	}
	return outs, allReturned
}

// runChain runs one chain of hooks whose base context fill writes into the
// batch's own HookContext: a single chain (an advance's exit chain, an
// entry chain) then costs no allocation for its job, its base context or
// the outcome list of runChains.
func runChain(ctx context.Context, pool *workerPool, hooks []BoundHook, fill func(*HookContext)) ChainOutcome {
	if len(hooks) == 0 {
		return ChainOutcome{Status: StatusPass, Blocking: -1}
	}
	b := newBatch(nil, ctx)
	fill(&b.base)
	b.one[0] = chainJob{hooks: hooks, base: &b.base}
	b.jobs = b.one[:]
	pool.run(b.runFn)
	res, finished := b.supervise(ctx)
	out := res[len(res)-1]
	if finished {
		// res is the batch's own slice: out was copied out of it first.
		b.recycle()
	}
	return out
}

// batch is the shared state between a worker and its supervisor.
type batch struct {
	jobs   []chainJob
	parent context.Context
	// done receives one value when the worker has finished the batch (a
	// buffered channel rather than a closed one, so a recycled batch can
	// signal again).
	done chan struct{}

	mu        sync.Mutex
	outs      []ChainOutcome
	cur       ChainOutcome // the chain in progress
	running   *hookCtx     // the hook in progress, nil between hooks
	runName   string
	seq       uint64
	abandoned bool

	// Kept across uses of a recycled batch: the HookContext the hooks
	// see in turn, the supervisor's timer and the worker's entry point.
	hc    *HookContext
	timer *time.Timer
	runFn func()
	// one and base hold a single chain's job and base context (runChain),
	// so that neither is allocated per call. They live as long as the
	// batch: a worker abandoned at a hook's deadline may still read them,
	// and such a batch is never recycled.
	one  [1]chainJob
	base HookContext
}

// batches recycles the batches whose worker finished: a check or an
// advance then costs no allocation for its batch, its channel, its
// HookContext or its timer. A batch whose hook was abandoned is never
// recycled, since its worker may still be running.
var batches = sync.Pool{New: func() any {
	b := &batch{done: make(chan struct{}, 1), hc: new(HookContext)}
	b.runFn = b.run
	return b
}}

func newBatch(jobs []chainJob, parent context.Context) *batch {
	b := batches.Get().(*batch)
	b.jobs, b.parent = jobs, parent
	return b
}

// recycle returns a batch whose worker finished (supervise reported so) to
// the pool, dropping what it references.
func (b *batch) recycle() {
	*b.hc = HookContext{}
	b.base = HookContext{}
	b.one[0] = chainJob{}
	clear(b.outs)
	b.jobs, b.parent, b.outs = nil, nil, b.outs[:0]
	b.cur, b.running, b.runName, b.seq, b.abandoned = ChainOutcome{}, nil, "", 0, false
	batches.Put(b)
}

func (b *batch) run() {
	defer func() { b.done <- struct{}{} }()
	// One HookContext serves every hook of the batch in turn: a hook sees
	// it only until it returns (HookContext), and the next hook starts
	// after that, so copying the chain's base into it per hook replaces an
	// allocation per hook. A hook abandoned at its deadline keeps this one;
	// the chains after it run in a new batch with a context of their own.
	hc := b.hc
	// One full clock reading for the batch; each hook's start is then a
	// monotonic reading against it (time.Since), half the cost of Now.
	base, fresh := time.Now(), true
	for _, job := range b.jobs {
		out := ChainOutcome{Status: StatusPass, Blocking: -1, Results: make([]HookResult, 0, len(job.hooks))}
		// The chain's hook contexts come in one allocation. Each is a
		// hook's own (cancelled when it returns, never reused): a hook
		// that kept its ctx still sees it done.
		ctxs := make([]hookCtx, len(job.hooks))
		for i, h := range job.hooks {
			timeout := h.Timeout
			if timeout <= 0 {
				timeout = DefaultHookTimeout
			}
			hctx := &ctxs[i]
			hctx.Context, hctx.timeout = b.parent, timeout
			hctx.start(base, fresh)
			fresh = false
			b.mu.Lock()
			if b.abandoned {
				b.mu.Unlock()
				return
			}
			b.cur, b.running, b.runName = out, hctx, h.Name
			b.seq++
			b.mu.Unlock()

			*hc = *job.base
			if job.node != nil {
				hc.Node = job.node
			}
			hc.Params = h.Params
			hc.Results = out.Results[:len(out.Results):len(out.Results)]
			var began time.Time
			if hc.observe != nil {
				began = time.Now()
			}
			res := callHook(h, hctx, hc)
			hctx.cancel(context.Canceled)
			res = normalise(h, res)
			if hc.observe != nil {
				hc.observe(HookTiming{Node: nodeID(hc.Node), Hook: h.Name, Boundary: hc.Boundary, Mode: hc.Mode, Status: res.Status, Duration: time.Since(began)})
			}

			b.mu.Lock()
			if b.abandoned {
				b.mu.Unlock()
				return
			}
			out.Results = append(out.Results, res)
			b.running = nil
			b.mu.Unlock()
			if res.Status != StatusPass && res.Status != StatusSkip {
				out.Status = res.Status
				out.Blocking = len(out.Results) - 1
				break
			}
		}
		b.mu.Lock()
		b.outs = append(b.outs, out)
		b.mu.Unlock()
	}
}

// supervise waits for the worker, enforcing the running hook's deadline.
// It returns the outcomes of the chains that finished (the last one ending
// in a block when a hook overran), and finished when the worker is done
// with the batch (no hook was abandoned), so that it may be recycled.
func (b *batch) supervise(ctx context.Context) (outs []ChainOutcome, finished bool) {
	// Yield to the worker first. It was just readied on this processor and
	// usually finishes its hooks in microseconds; its result then waits in
	// the one-slot done channel without waking anyone, and no timer is
	// armed and nothing parks — a hand-off without the second wake-up.
	// Only a worker still busy (a hook that blocks, or a worker another
	// processor picked up) leaves the caller to arm the timer and wait; the
	// running hook's deadline still counts from its own start.
	runtime.Gosched()
	select {
	case <-b.done:
		return b.outs, true
	default:
	}
	timer := b.timer
	defer func() {
		if timer != nil {
			timer.Stop()
			if finished {
				b.timer = timer
			} else {
				b.timer = nil
			}
		}
	}()
	for {
		b.mu.Lock()
		running, seq := b.running, b.seq
		b.mu.Unlock()
		// Between hooks, no deadline can fall before the shortest timeout
		// from now; the timer re-arms for the running hook when it fires.
		wait := b.minTimeout()
		if running != nil {
			wait = time.Until(running.deadlineAt())
		}
		if timer == nil {
			timer = time.NewTimer(wait)
		} else {
			timer.Reset(wait)
		}
		select {
		case <-b.done:
			return b.outs, true
		case <-timer.C:
			b.mu.Lock()
			if b.running == nil || b.seq != seq || time.Now().Before(b.running.deadlineAt()) {
				b.mu.Unlock()
				continue // the worker moved on; watch the next hook
			}
			name, hctx := b.runName, b.running
			msg := fmt.Sprintf("the %s hook did not finish within %s", name, hctx.timeout.Round(time.Millisecond))
			return b.abandon(hctx, name, msg, context.DeadlineExceeded), false
		case <-ctx.Done():
			b.mu.Lock()
			if b.running == nil {
				// Between hooks: let the worker notice on its own.
				b.abandoned = true
				out := append(b.outs, ChainOutcome{Status: StatusBlock, Results: []HookResult{failed("(chain)", "the chain was cancelled before it finished")}, Blocking: 0})
				b.mu.Unlock()
				return out, false
			}
			name, hctx := b.runName, b.running
			return b.abandon(hctx, name, fmt.Sprintf("the %s hook was cancelled before it finished", name), ctx.Err()), false
		}
	}
}

func (b *batch) minTimeout() time.Duration {
	min := DefaultHookTimeout
	for _, j := range b.jobs {
		for _, h := range j.hooks {
			if h.Timeout > 0 && h.Timeout < min {
				min = h.Timeout
			}
		}
	}
	return min
}

// abandon ends the current chain with a block for the running hook. Called
// with b.mu held; releases it.
func (b *batch) abandon(hctx *hookCtx, name, msg string, err error) []ChainOutcome {
	b.abandoned = true
	cur := b.cur
	cur.Results = append(cur.Results[:len(cur.Results):len(cur.Results)], failed(name, msg))
	cur.Status = StatusBlock
	cur.Blocking = len(cur.Results) - 1
	out := append(b.outs, cur)
	b.mu.Unlock()
	hctx.cancel(err)
	return out
}

// callHook runs one hook, converting a panic into a block.
func callHook(h BoundHook, ctx *hookCtx, hc *HookContext) (res HookResult) {
	defer func() {
		if p := recover(); p != nil {
			res = failed(h.Name, fmt.Sprintf("the %s hook failed to run: %v", h.Name, p))
		}
	}()
	return h.Spec.Run(ctx, hc)
}

// normalise stamps the hook name, refuses invalid statuses and applies the
// reference's blocking flag.
func normalise(h BoundHook, res HookResult) HookResult {
	res.Hook = h.Name
	if !res.Status.Valid() {
		return failed(h.Name, fmt.Sprintf("the %s hook returned an invalid status %q", h.Name, string(res.Status)))
	}
	if h.Blocking && res.Status != StatusBlock {
		if res.Degraded != "" {
			res.Status = StatusBlock
			res.Messages = append(res.Messages, Finding(fmt.Sprintf("the %s hook could not complete its integration call and is declared blocking; the call's error is in the event log", h.Name), ""))
		}
	}
	return res
}

// sharedPool is the one worker pool every Runtime in the process hands its
// chains to. A Runtime therefore owns no goroutine and needs no Close: the
// pool parks at most maxIdleWorkers goroutines process-wide, and each parked
// worker exits after one to two idleWorkerTTLs without work, so an idle
// process returns to the goroutines it had before the first check.
var sharedPool = newWorkerPool(maxIdleWorkers, idleWorkerTTL)

const (
	maxIdleWorkers = 4
	idleWorkerTTL  = 30 * time.Second
)

type worker struct {
	// jobs hands the worker its next batch; a nil job tells a parked
	// worker to exit.
	jobs chan func()
	// parkedAt is the reaper's round in which the worker last parked
	// (under the pool's lock).
	parkedAt uint64
}

// workerPool keeps a few idle goroutines that run batches, so checks do not
// pay for a new goroutine (and its stack growth) each time. A nil pool
// starts a goroutine per batch.
//
// A parked worker waits on its own channel and nothing else; one timer for
// the whole pool, ticking once per TTL while a worker is parked, sends away
// the workers that were already parked at its previous tick (idle for
// between one and two TTLs). A hand-off therefore costs a lock and a
// channel send — no select, timer reset or clock reading per batch.
type workerPool struct {
	ttl time.Duration
	max int

	mu   sync.Mutex
	idle []*worker // parked workers, most recently parked last
	// reaper evicts idle workers; armed says a tick is pending, round
	// counts its ticks.
	reaper *time.Timer
	armed  bool
	round  uint64
}

func newWorkerPool(size int, ttl time.Duration) *workerPool {
	p := &workerPool{ttl: ttl, max: size}
	p.reaper = time.AfterFunc(time.Hour, p.reap)
	p.reaper.Stop()
	return p
}

func (p *workerPool) run(f func()) {
	if p == nil {
		go f()
		return
	}
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		w := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		w.jobs <- f // a parked worker's channel is empty: this never blocks
		return
	}
	p.mu.Unlock()
	w := &worker{jobs: make(chan func(), 1)}
	w.jobs <- f
	go p.loop(w)
}

// loop runs jobs until the pool already holds enough idle workers or the
// reaper sends it away.
func (p *workerPool) loop(w *worker) {
	for f := <-w.jobs; f != nil; f = <-w.jobs {
		f()
		if !p.park(w) {
			return
		}
	}
}

// park puts w among the idle workers; false when the pool has enough.
func (p *workerPool) park(w *worker) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.idle) >= p.max {
		return false
	}
	w.parkedAt = p.round
	p.idle = append(p.idle, w)
	if !p.armed {
		p.armed = true
		p.reaper.Reset(p.ttl)
	}
	return true
}

// reap sends away the workers parked since before the previous tick, and
// ticks again while any worker is parked.
func (p *workerPool) reap() {
	p.mu.Lock()
	defer p.mu.Unlock()
	kept := p.idle[:0]
	for _, w := range p.idle {
		if w.parkedAt == p.round {
			kept = append(kept, w)
			continue
		}
		w.jobs <- nil
	}
	clear(p.idle[len(kept):])
	p.idle = kept
	p.round++
	p.armed = len(kept) > 0
	if p.armed {
		p.reaper.Reset(p.ttl)
	}
}

func failed(hook, text string) HookResult {
	return HookResult{Status: StatusBlock, Hook: hook, Retriable: false, Messages: []Message{Finding(text, "")}}
}

// hookCtx is the context a hook runs under: its parent plus the hook's own
// deadline. Unlike context.WithTimeout it starts no timer of its own (the
// supervisor in RunChain holds the only one) and allocates its Done channel
// only when a hook asks for it — most hooks never do.
type hookCtx struct {
	context.Context
	timeout time.Duration

	mu       sync.Mutex
	deadline time.Time
	done     chan struct{}
	err      error
}

var _ context.Context = (*hookCtx)(nil)

// start sets the hook's deadline to its timeout from now: base itself when
// fresh (the batch's first hook), else base plus the time elapsed since (a
// monotonic reading).
func (c *hookCtx) start(base time.Time, fresh bool) {
	now := base
	if !fresh {
		now = base.Add(time.Since(base))
	}
	d := now.Add(c.timeout)
	c.mu.Lock()
	c.deadline = d
	c.mu.Unlock()
}

func (c *hookCtx) deadlineAt() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.deadline.IsZero() {
		return time.Now().Add(c.timeout)
	}
	return c.deadline
}

// Deadline implements context.Context.
func (c *hookCtx) Deadline() (time.Time, bool) {
	d := c.deadlineAt()
	if pd, ok := c.Context.Deadline(); ok && pd.Before(d) {
		return pd, true
	}
	return d, true
}

// Done implements context.Context.
func (c *hookCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
		if c.err != nil {
			close(c.done)
			return c.done
		}
		// Close at the deadline even if the supervisor is gone, and follow
		// the parent's cancellation.
		d := time.Until(c.deadline)
		if c.deadline.IsZero() {
			d = c.timeout
		}
		pdone := c.Context.Done()
		done := c.done
		go func() {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C:
				c.cancel(context.DeadlineExceeded)
			case <-pdone:
				c.cancel(c.Context.Err())
			case <-done:
			}
		}()
	}
	return c.done
}

// Err implements context.Context.
func (c *hookCtx) Err() error {
	c.mu.Lock()
	err, deadline := c.err, c.deadline
	c.mu.Unlock()
	if err != nil {
		return err
	}
	if perr := c.Context.Err(); perr != nil {
		return perr
	}
	if !deadline.IsZero() && !time.Now().Before(deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

func (c *hookCtx) cancel(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	c.err = err
	if c.done != nil {
		close(c.done)
	}
}

func nodeID(n *Node) string {
	if n == nil {
		return ""
	}
	return n.ID
}
