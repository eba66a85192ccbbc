package loop

import (
	"os"
	"sync"
)

// beneath is a directory that reads resolve beneath (a checkout): its
// path, and on Linux the directory opened once (O_PATH) for openat2, so a
// `check --all` pays one open per item, not one per artifact. The
// descriptor is an *os.File's: it is closed when the value is collected.
type beneath struct {
	path string

	once sync.Once
	dir  *os.File
	err  error
}

func newBeneath(path string) *beneath { return &beneath{path: path} }
