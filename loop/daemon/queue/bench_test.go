package queue_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/loop/daemon/queue"
)

// BenchmarkPut publishes events from 8 goroutines to the embedded stream
// and waits for each acknowledgement (what the receiver does per webhook),
// each with a 10 KB payload (GitHub's issue_comment example is 10 KB
// compacted).
func BenchmarkPut(b *testing.B) {
	q, err := queue.Open(context.Background(), queue.Config{StoreDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	payload := []byte(`{"x":"` + strings.Repeat("a", 10000) + `"}`)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	cpu0 := cpuTime()
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				ev := &ingress.Event{Event: "issue_comment", DeliveryID: fmt.Sprintf("d-%d", i), Repo: "o/r", Payload: payload}
				if err := q.Put(context.Background(), ev); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
}
