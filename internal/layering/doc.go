// Package layering holds no code: its test checks that the module's
// packages import one another only in the direction README's "How it is
// built" describes (graph at the bottom, binaries at the top).
package layering
