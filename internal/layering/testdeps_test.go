package layering

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// testOnlyDeps are packages (path prefixes) that exist for tests: no binary
// links one. The standard library's testing package itself is not listed:
// loopd links it through prometheus/common (expfmt → go-abnf), which we do
// not control, and linking it costs no start-up (it registers no flags until
// testing.Init).
var testOnlyDeps = []string{
	module + "/graph/graphtest",
	module + "/run/runtest",
	"github.com/stretchr/testify",
	"github.com/chromedp",
	"net/http/httptest",
	"testing/fstest",
	"testing/iotest",
}

// TestBinariesLinkNoTestDoubles: a test double in a binary is size and
// build time every user pays for one verb (loopctl demo once linked
// graph/graphtest, and testing/fstest with it).
func TestBinariesLinkNoTestDoubles(t *testing.T) {
	gotool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go tool is not on PATH: the link-set rule needs `go list -deps`")
	}
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	for _, bin := range []string{"./cmd/loopd", "./cmd/loopctl", "./cmd/loop-gate"} {
		cmd := exec.Command(gotool, "list", "-deps", bin)
		cmd.Dir = root
		out, err := cmd.Output()
		require.NoError(t, err, "go list -deps %s", bin)
		for _, dep := range strings.Fields(string(out)) {
			for _, bad := range testOnlyDeps {
				if dep == bad || strings.HasPrefix(dep, bad+"/") {
					t.Errorf("%s links %s, a test-only package: give the binary its own small stand-in", bin, dep)
				}
			}
		}
	}
}
