//go:build unix

package daemon

import (
	"io/fs"
	"syscall"
)

// hardLinks is a file's link count (1 when the system does not say).
func hardLinks(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}
