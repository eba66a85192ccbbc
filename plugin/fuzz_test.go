package plugin

import (
	"strings"
	"testing"
)

// FuzzCommandProgram: hook command lines come from files the user (or an
// earlier install) wrote. Reading one never panics, and a program quoted by
// GateCommand reads back as itself.
func FuzzCommandProgram(f *testing.F) {
	for _, s := range []string{"loop-gate", "/opt/the loop/loop-gate", "it's", `C:\bin\loop-gate.exe`, `a"b`, "", "  ", "'", `\`, "$HOME/x", "a\tb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, program string) {
		_ = IsGateCommand(program)
		_ = CommandProgram(program)
		if strings.ContainsAny(program, "\x00\r\n") || strings.TrimSpace(program) == "" {
			return
		}
		cmd := GateCommand(program, "claude")
		if got := CommandProgram(cmd); got != program {
			t.Fatalf("GateCommand(%q) = %q reads back as %q", program, cmd, got)
		}
		if !strings.HasSuffix(GateInvocation(cmd), " claude") || !strings.HasSuffix(cmd, CrashGuard) {
			t.Fatalf("%q lost its argument or its guard", cmd)
		}
		if WithCrashGuard(cmd) != cmd {
			t.Fatalf("%q guarded twice", cmd)
		}
	})
}
