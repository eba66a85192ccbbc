package graph

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
)

// TestRegisterDefaultsLazily: a deferred fill runs once, on the first use
// of the default registry, before any caller sees it — also when several
// goroutines ask at once (run with -race).
func TestRegisterDefaultsLazily(t *testing.T) {
	var calls atomic.Int32
	noop := func(context.Context, *HookContext) HookResult { return HookResult{Status: StatusPass} }
	RegisterDefaultsLazily(func(r *Registry) {
		calls.Add(1)
		r.Register(HookSpec{Name: "lazy-test-hook-a", Run: noop})
	})
	RegisterDefaultsLazily(func(r *Registry) {
		if _, ok := r.Lookup("lazy-test-hook-a"); !ok {
			t.Error("fills ran out of order")
		}
		r.Register(HookSpec{Name: "lazy-test-hook-b", Run: noop})
	})
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reg := DefaultRegistry()
			for _, name := range []string{"lazy-test-hook-a", "lazy-test-hook-b"} {
				if _, ok := reg.Lookup(name); !ok {
					t.Errorf("DefaultRegistry returned before the deferred fill registered %s", name)
				}
			}
		}()
	}
	wg.Wait()
	if n := calls.Load(); n != 1 {
		t.Fatalf("the deferred fill ran %d times, want once", n)
	}
}
