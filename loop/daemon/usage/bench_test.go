package usage

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkTailRead is a poll's work on one record: a Claude Code
// transcript of 2,000 turns (with the real CLI's other lines between
// them: attachments, user turns) read from its start, and the incremental
// poll that finds nothing new. Reports MB/s and CPU per read beside wall.
func BenchmarkTailRead(b *testing.B) {
	home := b.TempDir()
	p := filepath.Join(home, ".claude", "projects", "p", "s.jsonl")
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		b.Fatal(err)
	}
	var sb strings.Builder
	filler := `{"type":"attachment","attachment":{"type":"skill_listing","content":"` + strings.Repeat("x", 2000) + `"}}`
	for i := range 2000 {
		fmt.Fprintf(&sb, `{"type":"user","message":{"role":"user","content":"turn %d"}}`+"\n", i)
		fmt.Fprintf(&sb, `{"type":"assistant","timestamp":"2026-12-03T14:32:41.772Z","requestId":"req_%d","message":{"id":"msg_%d","model":"claude-sonnet-4-5","usage":{"input_tokens":1001,"cache_creation_input_tokens":301,"cache_read_input_tokens":4001,"output_tokens":201}}}`+"\n", i, i)
		sb.WriteString(filler + "\n")
	}
	if err := os.WriteFile(p, []byte(sb.String()), 0o600); err != nil {
		b.Fatal(err)
	}
	size := int64(sb.Len())
	b.Run("whole", func(b *testing.B) {
		b.SetBytes(size)
		cpu0 := cpuNow()
		for b.Loop() {
			tl, _ := NewTail(HarnessClaude, home, p, Position{})
			n := 0
			for {
				turns, err := tl.Read()
				if err != nil {
					b.Fatal(err)
				}
				if len(turns) == 0 && tl.Pos.Offset == size {
					break
				}
				n += len(turns)
			}
			if n != 2000 {
				b.Fatalf("%d turns", n)
			}
		}
		b.ReportMetric(float64((cpuNow()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
	})
	b.Run("nothing-new", func(b *testing.B) {
		tl, _ := NewTail(HarnessClaude, home, p, Position{})
		for tl.Pos.Offset < size {
			if _, err := tl.Read(); err != nil {
				b.Fatal(err)
			}
		}
		cpu0 := cpuNow()
		for b.Loop() {
			if turns, err := tl.Read(); err != nil || len(turns) != 0 {
				b.Fatal(err, len(turns))
			}
		}
		b.ReportMetric(float64((cpuNow()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
	})
}
