// Package buildinfo says which version of theloop a binary is.
package buildinfo

import "runtime/debug"

// Version returns stamped (set with -ldflags "-X main.version=...") when it
// is not empty, else the module version and VCS revision the Go toolchain
// recorded, else "dev".
func Version(stamped string) string {
	if stamped != "" {
		return stamped
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		v := bi.Main.Version
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += " (" + s.Value[:12] + ")"
			}
		}
		if v != "" {
			return v
		}
	}
	return "dev"
}
