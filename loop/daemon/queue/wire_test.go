package queue

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/workitem"
)

func TestWireRoundTrip(t *testing.T) {
	for _, payload := range []string{"", `{"comment":{"body":"hi \"there\"","id":7}}`} {
		ev := &ingress.Event{Event: "issue_comment", Action: "created", DeliveryID: "d-1", Repo: "o/r",
			WorkItems: []workitem.Ref{{Provider: "github", Owner: "o", Repo: "r", Number: 3}}, Actor: "dana",
			Comments: []ingress.Comment{{ID: "7", Author: "dana", Body: "hi", UpdatedAt: "2026-01-01T00:00:00Z"}},
			Control:  &ingress.ControlCommand{Command: ingress.CmdStart, Actor: "dana"}, Labeled: true,
			Payload: json.RawMessage(payload), Source: ingress.SourceWebhook, ReceivedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
		if payload == "" {
			ev.Payload = nil
		}
		msg, err := encode("s", ev)
		require.NoError(t, err)
		got, err := decode(msg.Header, msg.Data)
		require.NoError(t, err)
		require.Equal(t, ev, got)
	}
}

func TestDecodePlainJSONEvents(t *testing.T) {
	b, err := json.Marshal(&ingress.Event{Event: "issues", DeliveryID: "d", Payload: json.RawMessage(`{"a":1}`)})
	require.NoError(t, err)
	ev, err := decode(nats.Header{}, b)
	require.NoError(t, err)
	require.JSONEq(t, `{"a":1}`, string(ev.Payload))
}

func FuzzDecode(f *testing.F) {
	f.Add("12", []byte(`{"event":"x"}{"a":1}`))
	f.Add("", []byte(`{"event":"x","deliveryId":"d"}`))
	f.Add("-1", []byte(`{}`))
	f.Add("999", []byte(`{}`))
	f.Fuzz(func(t *testing.T, off string, data []byte) {
		h := nats.Header{}
		if off != "" {
			h.Set(HeaderPayloadOffset, off)
		}
		_, _ = decode(h, data)
	})
}
