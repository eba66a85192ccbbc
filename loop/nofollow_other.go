//go:build !unix

package loop

import "os"

// oNoFollow is not available here; writers check with Lstat instead.
const oNoFollow = 0

// oNonBlock is not available here.
const oNonBlock = 0

// singleLink cannot count links here.
func singleLink(*os.File) error { return nil }

// readRegular reads the regular file at path when it holds at most limit
// bytes (see the unix version).
func readRegular(path string, limit int64) ([]byte, error) { return readCappedPortable(path, limit) }

// readRegularInto is readRegular here: alloc is not used.
func readRegularInto(path string, limit int64, _ func(int) []byte) ([]byte, error) {
	return readCappedPortable(path, limit)
}

// openDir opens the directory at path for listing.
func openDir(path string) (*os.File, error) { return os.Open(path) }
