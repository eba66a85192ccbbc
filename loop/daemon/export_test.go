package daemon

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
