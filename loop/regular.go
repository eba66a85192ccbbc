package loop

import (
	"fmt"
	"io"
	"io/fs"
	"os"
)

// errNotRegular: a path theloop reads or appends to is a FIFO, a device or
// a directory. The agent writes the checkout, and a named pipe planted as
// harness-config.yaml or graph-state.json would block an open forever.
var errNotRegular = fmt.Errorf("%w: not a regular file", ErrUnsafePath)

// openRegular opens path with flag without blocking on a named pipe and
// returns the file only when it is a regular file.
func openRegular(path string, flag int, perm fs.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, flag|oNonBlock, perm)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, &fs.PathError{Op: "open", Path: path, Err: errNotRegular}
	}
	return f, nil
}

// readRegular reads at most limit bytes of the regular file at path
// (limit < 0: no limit); a longer file reports truncated.
func readRegular(path string, limit int64) (data []byte, truncated bool, err error) {
	f, err := openRegular(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	var r io.Reader = f
	if limit >= 0 {
		r = io.LimitReader(f, limit+1)
	}
	data, err = io.ReadAll(r)
	if err != nil {
		return nil, false, err
	}
	if limit >= 0 && int64(len(data)) > limit {
		return data[:limit], true, nil
	}
	return data, false, nil
}
