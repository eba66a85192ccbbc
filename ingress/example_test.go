package ingress_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/theloop-dev/theloop/ingress"
)

// A receiver hands routed events to the daemon's queue (here a function)
// and answers 202 once the event is kept.
func ExampleNewReceiver() {
	cfg := ingress.DefaultConfig()
	cfg.Secret = []byte("s3cret")
	cfg.Repositories = []string{"octo/repo"}
	cfg.AuthorizedUsers = []string{"alice"}
	queue := ingress.SinkFunc(func(_ context.Context, ev *ingress.Event) error {
		fmt.Println(ev.Event, ev.WorkItems[0], ev.Actor, ev.Control.Command)
		return nil
	})
	recv, err := ingress.NewReceiver(cfg, ingress.ReceiverDeps{Sink: queue})
	if err != nil {
		panic(err)
	}
	body := []byte(`{"action":"created","repository":{"full_name":"octo/repo"},"issue":{"number":15},
		"comment":{"id":1,"body":"the-loop start","user":{"login":"alice"}},"sender":{"login":"alice"}}`)
	req := httptest.NewRequest(http.MethodPost, "/gh-webhook", bytes.NewReader(body))
	req.Header.Set("X-GitHub-Event", "issue_comment")
	req.Header.Set("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958")
	req.Header.Set("X-Hub-Signature-256", ingress.Sign(cfg.Secret, body))
	rec := httptest.NewRecorder()
	recv.ServeHTTP(rec, req)
	fmt.Println(rec.Code)
	// Output:
	// issue_comment github:octo/repo#15 alice start
	// 202
}
