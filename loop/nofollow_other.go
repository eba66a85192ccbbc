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

// openBeneathFile opens rel read-only resolved beneath root (os.Root).
func openBeneathFile(b *beneath, rel string) (*os.File, error) {
	root := b.path
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	f, err := r.Open(rel)
	if err != nil {
		return nil, beneathError(root, err)
	}
	return f, nil
}

// readBeneathInto is readRegularInto for rel resolved beneath root
// (os.Root: a link leading outside root is refused).
func readBeneathInto(b *beneath, rel string, limit int64, _ func(int) []byte) ([]byte, error) {
	root := b.path
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	f, err := r.Open(rel)
	if err != nil {
		return nil, beneathError(root, err)
	}
	defer f.Close()
	return readOpenCapped(f, limit)
}
