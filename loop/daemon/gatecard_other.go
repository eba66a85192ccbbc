//go:build !unix

package daemon

const openNonBlock = 0
