package graph

import (
	"context"
	"fmt"
	"strings"
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
// last non-empty data.outcome in chain order (so a gate's verdict survives
// a later bookkeeping hook), else "pass".
func (c ChainOutcome) Outcome() string {
	if c.Blocking >= 0 {
		return c.Results[c.Blocking].Outcome()
	}
	for i := len(c.Results) - 1; i >= 0; i-- {
		if o, ok := c.Results[i].Data["outcome"].(string); ok && o != "" {
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
// side effect (data.error set): a channel outage that must be visible but
// must not wedge the graph.
func (c ChainOutcome) Degraded() []HookResult {
	var out []HookResult
	for _, r := range c.Results {
		if e, _ := r.Data["error"].(string); e != "" && r.Status != StatusBlock {
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
// (data.error) into a block.
func RunChain(ctx context.Context, hooks []BoundHook, base *HookContext) ChainOutcome {
	out := ChainOutcome{Status: StatusPass, Blocking: -1, Results: make([]HookResult, 0, len(hooks))}
	for _, h := range hooks {
		hc := *base
		hc.Params = h.Params
		hc.Results = out.Results[:len(out.Results):len(out.Results)]
		res := runHook(ctx, h, &hc)
		if h.Blocking && res.Status != StatusBlock {
			if e, _ := res.Data["error"].(string); e != "" {
				res.Status = StatusBlock
				res.Messages = append(res.Messages, Finding(fmt.Sprintf("the %s hook could not complete its integration call and is declared blocking; the call's error is in the event log", h.Name), ""))
			}
		}
		out.Results = append(out.Results, res)
		if res.Status != StatusPass && res.Status != StatusSkip {
			out.Status = res.Status
			out.Blocking = len(out.Results) - 1
			break
		}
	}
	return out
}

// runHook calls one hook under its deadline, converting panics, invalid
// statuses and overruns into non-retriable blocks.
func runHook(ctx context.Context, h BoundHook, hc *HookContext) HookResult {
	timeout := h.Timeout
	if timeout <= 0 {
		timeout = DefaultHookTimeout
	}
	hctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	done := make(chan HookResult, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- failed(h.Name, fmt.Sprintf("the %s hook failed to run: %v", h.Name, p))
			}
		}()
		done <- h.Spec.Run(hctx, hc)
	}()

	var res HookResult
	select {
	case res = <-done:
	case <-hctx.Done():
		// Prefer a result that raced the deadline.
		select {
		case res = <-done:
		default:
			if ctx.Err() != nil {
				return failed(h.Name, fmt.Sprintf("the %s hook was cancelled before it finished", h.Name))
			}
			return failed(h.Name, fmt.Sprintf("the %s hook did not finish within %s", h.Name, timeout.Round(time.Millisecond)))
		}
	}
	res.Hook = h.Name
	if !res.Status.Valid() {
		return failed(h.Name, fmt.Sprintf("the %s hook returned an invalid status %q", h.Name, string(res.Status)))
	}
	return res
}

func failed(hook, text string) HookResult {
	return HookResult{Status: StatusBlock, Hook: hook, Retriable: false, Messages: []Message{Finding(text, "")}}
}
