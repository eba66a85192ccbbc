package dispatch_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/loop/daemon/dispatch"
	"github.com/theloop-dev/theloop/loop/daemon/queue"
	"github.com/theloop-dev/theloop/workitem"
)

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// dropAll drops every event in Handle; triageAll drops it in Triage.
type dropAll struct{}

func (dropAll) Handle(context.Context, *ingress.Event) error { return dispatch.ErrNoEffect }

type triageAll struct{ dropAll }

func (triageAll) Triage(context.Context, *ingress.Event) error { return dispatch.ErrNoEffect }

// BenchmarkDrain is the dispatcher's own cost per event: b.N distinct
// comments on one work item (loadgen's load: strictly ordered, one at a
// time) are kept first, then the dispatcher consumes them with a handler
// that drops each without effect — in Handle (after the delivery and
// content dedup records are read and written) or in Triage (before) —
// fetch, decode, ack. cpu-µs/event is the process CPU (the embedded NATS
// server's share included) and is the figure to compare on a shared
// machine; events/s is the wall clock.
func BenchmarkDrain(b *testing.B) {
	b.Run("handle-drops", func(b *testing.B) { benchDrain(b, dropAll{}) })
	b.Run("triage-drops", func(b *testing.B) { benchDrain(b, triageAll{}) })
}

func benchDrain(b *testing.B, h dispatch.Handler) {
	raw, err := os.ReadFile("../../../../shared/fixtures/github-webhooks/issue_comment/created.payload.json")
	if errors.Is(err, os.ErrNotExist) {
		b.Skip("GitHub webhook fixtures not found beside the repository (../shared/fixtures); skipping")
	}
	if err != nil {
		b.Fatal(err)
	}
	q, err := queue.Open(context.Background(), queue.Config{StoreDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	item := []workitem.Ref{{Provider: "github", Owner: "Codertocat", Repo: "Hello-World", Number: 1}}
	for i := range b.N {
		ev := &ingress.Event{
			Event: "issue_comment", Action: "created", Repo: "Codertocat/Hello-World",
			DeliveryID: "d-" + strconv.Itoa(i), WorkItems: item, Actor: "Codertocat",
			Comments: []ingress.Comment{{ID: strconv.Itoa(900_000_000 + i), Author: "Codertocat", Body: "You are totally right! I'll get this fixed right away.",
				UpdatedAt: "2019-05-15T15:20:21Z", URL: "https://github.com/Codertocat/Hello-World/issues/1#issuecomment-492700400"}},
			Source: ingress.SourceWebhook, Payload: raw, ReceivedAt: time.Now().UTC(),
		}
		if err := q.Put(context.Background(), ev); err != nil {
			b.Fatal(err)
		}
	}
	var n atomic.Int64
	done := make(chan struct{})
	d, err := dispatch.New(q, h, dispatch.Config{
		Observe: func(o dispatch.Observation) {
			if o.Outcome != dispatch.OutcomeDropped {
				b.Errorf("event %s: %s (%v)", o.DeliveryID, o.Outcome, o.Err)
			}
			if n.Add(1) == int64(b.N) {
				close(done)
			}
		}})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.ResetTimer()
	cpu0, wall0 := cpuTime(), time.Now()
	ran := make(chan error, 1)
	go func() { ran <- d.Run(ctx) }()
	select {
	case <-done:
	case err := <-ran:
		b.Fatalf("dispatcher stopped: %v", err)
	}
	wall, cpu := time.Since(wall0), cpuTime()-cpu0
	b.StopTimer()
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/event")
	b.ReportMetric(float64(b.N)/wall.Seconds(), "events/s")
	cancel()
	<-ran
}
