package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// BenchmarkLoopGateHarness measures `loop-gate <harness>` as each harness
// runs it, one whole process per stop with that harness's payload, on a
// work item that blocks at `implementation` (the full job: payload, walk,
// recompute, attempt counter, the answer in the harness's form), beside
// an empty Go program built on the same machine (go-hello, the floor).
// Report the ratio of medians (ms-median of a harness / of go-hello).
//
//	go test ./cmd/loop-gate -run '^$' -bench LoopGateHarness -benchtime 200x
func BenchmarkLoopGateHarness(b *testing.B) {
	if buildErr != nil {
		b.Skip(buildErr)
	}
	root := writeRepo(b, atImplementationBlock)
	home := b.TempDir()
	env := []string{
		"HOME=" + home,
		"XDG_CACHE_HOME=" + filepath.Join(home, "cache"),
		"THE_LOOP_STATE_ROOT=" + filepath.Join(home, "state"),
		"PATH=" + os.Getenv("PATH"),
		"THE_LOOP_WORK_ITEM=" + fixtureItem,
		"THE_LOOP_GATE_MAX_ATTEMPTS=1000000000",
	}
	hello := buildHello(b)
	for _, bc := range []struct {
		harness string
		payload []byte
		want    string // stdout prefix
	}{
		{"claude", claudePayload(root), `{"decision":"block"`},
		{"cursor", cursorPayload(root, "completed"), `{"followup_message"`},
		{"codex", codexPayload(root), `{"decision":"block"`},
		{"gemini", geminiPayload(root), `{"decision":"deny"`},
		{"go-hello", nil, ""},
	} {
		b.Run(bc.harness, func(b *testing.B) {
			bin, args := gateBinary, []string{bc.harness}
			if bc.harness == "go-hello" {
				if hello == "" {
					b.Skip("could not build the empty Go program")
				}
				bin, args = hello, nil
			}
			var times []time.Duration
			var out bytes.Buffer
			for b.Loop() {
				out.Reset()
				cmd := exec.Command(bin, args...)
				cmd.Env = env
				cmd.Stdin = bytes.NewReader(bc.payload)
				cmd.Stdout = &out
				start := time.Now()
				err := cmd.Run()
				times = append(times, time.Since(start))
				if err != nil || !bytes.HasPrefix(out.Bytes(), []byte(bc.want)) {
					b.Fatalf("%s %v: %v, stdout %q", bin, args, err, out.String())
				}
			}
			slices.Sort(times)
			b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "ms-median")
			b.ReportMetric(float64(times[len(times)*9/10].Microseconds())/1000, "ms-p90")
		})
	}
}
