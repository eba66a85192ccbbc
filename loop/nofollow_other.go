//go:build !unix

package loop

// oNoFollow is not available here; writers check with Lstat instead.
const oNoFollow = 0

// oNonBlock is not available here.
const oNonBlock = 0
