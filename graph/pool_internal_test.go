package graph

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Parked workers exit once the pool's idle TTL passes without work (within
// two TTLs), and a worker sent away while parked is never handed a job: the
// pool starts a fresh one.
func TestIdleWorkersExitAfterTheirTTL(t *testing.T) {
	before := runtime.NumGoroutine()
	p := newWorkerPool(4, 20*time.Millisecond)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		p.run(wg.Done)
	}
	wg.Wait()
	// Polled here rather than with require.Eventually, whose own goroutine
	// would be counted.
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	require.LessOrEqual(t, runtime.NumGoroutine(), before, "parked workers did not exit after their TTL")

	// With the workers sent away, new work must still run.
	for range 8 {
		done := make(chan struct{})
		p.run(func() { close(done) })
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("a job handed to the pool after its workers expired never ran")
		}
	}
}
