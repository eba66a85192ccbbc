package ingress

import (
	"encoding/json"
	"fmt"
)

// AppendJSON appends ev's JSON encoding — the queue's wire format, the same
// document json.Marshal produces — to dst, copying Payload verbatim.
// json.Marshal re-validates and compacts a json.RawMessage, a full pass
// over a payload of up to 25 MB that the receiver has already validated;
// this does not. Payload must be valid JSON (the router and the poller
// only ever set it so); an empty Payload is omitted.
func (e *Event) AppendJSON(dst []byte) ([]byte, error) {
	head := *e
	head.Payload = nil
	b, err := json.Marshal(&head)
	if err != nil {
		return dst, fmt.Errorf("ingress: encoding event %s: %w", e.DeliveryID, err)
	}
	if len(e.Payload) == 0 {
		return append(dst, b...), nil
	}
	dst = append(dst, b[:len(b)-1]...) // drop the closing brace
	dst = append(dst, `,"payload":`...)
	dst = append(dst, e.Payload...)
	return append(dst, '}'), nil
}

// DecodeEvent decodes an Event from its wire format.
func DecodeEvent(b []byte) (*Event, error) {
	var ev Event
	if err := json.Unmarshal(b, &ev); err != nil {
		return nil, fmt.Errorf("ingress: decoding an event: %w", err)
	}
	return &ev, nil
}
