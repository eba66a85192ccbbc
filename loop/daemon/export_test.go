package daemon

import (
	"context"

	"github.com/theloop-dev/theloop/workitem"
)

// Test hooks for the external test package (compiled into tests only).

// Fault points of a paste (paste.go).
const (
	FaultAfterIntent = faultAfterIntent
	FaultAfterPaste  = faultAfterPaste
)

// ErrInjectedCrash is what a test's fault returns to stand for a crash.
var ErrInjectedCrash = errInjectedCrash

// InjectPasteFault makes f run at every fault point of every paste (point,
// and the step's key): an error from it ends the dispatch there, as a crash
// would, and the queue delivers the event again. Call it once the daemon is
// ready; nil removes it.
func (d *Daemon) InjectPasteFault(f func(point, key string) error) {
	if f == nil {
		d.intake.faults.Store(nil)
		return
	}
	d.intake.faults.Store(&f)
}

// ReplayAssignment delivers text as the graph's deliver-assignment hook
// does while handling the delivery step — what a redelivery after a crash
// between an assignment's paste and the state that records it does again.
func (d *Daemon) ReplayAssignment(ctx context.Context, step string, item workitem.Ref, text string) (bool, error) {
	rec, err := d.reg.Get(item)
	if err != nil {
		return false, err
	}
	d.link.mu.Lock()
	d.link.targets[rec.Cwd+"\x00"+item.SpecID()] = item
	d.link.mu.Unlock()
	return d.link.deliverAssignment(withPasteStep(ctx, step), rec.Cwd, item.SpecID(), text)
}

// PasteMarker is the marker line a paste of key ends with.
func PasteMarker(key string) string { return pasteMarker(key) }
