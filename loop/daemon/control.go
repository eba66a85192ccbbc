package daemon

import (
	"fmt"
	"time"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/sessions"
	"github.com/theloop-dev/theloop/workitem"
)

// controlStore is the durable control record (docs/daemon.md §5.3), kept by
// package ingress in the work item's portable record; this adapter speaks
// in the sessions' work-item type.
type controlStore struct {
	ps *ingress.PortableStore
}

func openControlStore(root string, clock graph.Clock) *controlStore {
	return &controlStore{ps: ingress.NewPortableStore(root, clock)}
}

func refOf(item workitem.Ref) (workitem.Ref, error) {
	r, err := item.Canonical()
	if err != nil {
		return workitem.Ref{}, fmt.Errorf("control record of %s: %w", item, err)
	}
	return r, nil
}

// Last returns the last recorded command (nil when none).
func (c *controlStore) Last(item workitem.Ref) (*ingress.ControlRecord, error) {
	r, err := refOf(item)
	if err != nil {
		return nil, err
	}
	return c.ps.Control(r)
}

// StartRequested reports whether the last command arms the work item.
func (c *controlStore) StartRequested(item workitem.Ref) (bool, error) {
	r, err := refOf(item)
	if err != nil {
		return false, err
	}
	return c.ps.StartRequested(r)
}

// Record writes cmd as the work item's last command.
func (c *controlStore) Record(item workitem.Ref, cmd ingress.Command, source, actor, note string, at time.Time) error {
	r, err := refOf(item)
	if err != nil {
		return err
	}
	return c.ps.RecordControl(r, ingress.ControlRecord{Ref: r.String(), Command: cmd, Source: source, Actor: actor,
		RequestedAt: at.UTC().Format(sessions.TimeLayout), Note: note})
}

// Clear writes the tombstone.
func (c *controlStore) Clear(item workitem.Ref) error {
	r, err := refOf(item)
	if err != nil {
		return err
	}
	return c.ps.ClearControl(r)
}
