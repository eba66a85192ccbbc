//go:build !unix

package loop

import "os"

// oNoFollow is not available here; writers check with Lstat instead.
const oNoFollow = 0

// oNonBlock is not available here.
const oNonBlock = 0

// singleLink cannot count links here.
func singleLink(*os.File) error { return nil }
