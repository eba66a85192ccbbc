package daemon_test

import (
	"os"
	"testing"

	"github.com/theloop-dev/theloop/loop/daemon/sandbox"
)

// TestMain lets this test binary serve as the sandbox launcher: the daemons
// these tests run confine their sessions (routing.sandbox defaults to on)
// through os.Executable(), which is this binary.
func TestMain(m *testing.M) {
	sandbox.MaybeRunLauncher()
	os.Exit(m.Run())
}
