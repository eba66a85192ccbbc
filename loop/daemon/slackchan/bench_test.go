package slackchan_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/theloop-dev/theloop/loop/daemon/slackchan"
	"github.com/theloop-dev/theloop/loop/daemon/slackchan/slacksim"
)

// BenchmarkEventsRequest is the Events API's hot path up to the 200:
// signature and timestamp, parse, the event id written to the on-disk
// ledger (one fsync), the handling started. The handling itself (a ticket
// comment, a paste) is the backend's and is not measured here.
func BenchmarkEventsRequest(b *testing.B) {
	sim := slacksim.New()
	defer sim.Close()
	be := &backend{authorized: map[string]bool{"alice": true}}
	now := time.Now()
	ch, err := slackchan.New(slackchan.Config{Mode: slackchan.ModeEvents, Channel: "#loop", BotToken: "xoxb-b", SigningSecret: secret,
		Users: map[string]string{"UALICE": "alice"}, StateDir: b.TempDir(), APIURL: sim.APIURL()},
		slackchan.Deps{Backend: be, Now: func() time.Time { return now }})
	if err != nil {
		b.Fatal(err)
	}
	defer ch.Close()
	th, err := ch.OpenThread(context.Background(), item)
	if err != nil {
		b.Fatal(err)
	}
	h := ch.Handler()
	b.ResetTimer()
	for i := range b.N {
		body := slacksim.MessageEvent(fmt.Sprintf("EvB%d", i), th.Channel, "1.0", "2.0", "UALICE", "not in a bound thread")
		r := httptest.NewRequest(http.MethodPost, slackchan.DefaultEventsPath, bytes.NewReader(body))
		slacksim.Sign(r, secret, body, now)
		rr := httptest.NewRecorder()
		h.ServeHTTP(rr, r)
		if rr.Code != http.StatusOK {
			b.Fatal(rr.Code)
		}
	}
}
