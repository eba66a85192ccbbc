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
// Each iteration runs all five once, in turn, so a loaded machine weighs
// on each alike; it reports each one's median and its ratio to the empty
// program's median (<harness>-x).
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
	if hello == "" {
		b.Skip("could not build the empty Go program")
	}
	runs := []struct {
		name    string
		bin     string
		args    []string
		payload []byte
		want    string // stdout prefix
	}{
		{"claude", gateBinary, []string{"claude"}, claudePayload(root), `{"decision":"block"`},
		{"cursor", gateBinary, []string{"cursor"}, cursorPayload(root, "completed"), `{"followup_message"`},
		{"codex", gateBinary, []string{"codex"}, codexPayload(root), `{"decision":"block"`},
		{"gemini", gateBinary, []string{"gemini"}, geminiPayload(root), `{"decision":"deny"`},
		{"go-hello", hello, nil, nil, ""},
	}
	times := make([][]time.Duration, len(runs))
	var out bytes.Buffer
	for b.Loop() {
		for i, r := range runs {
			out.Reset()
			cmd := exec.Command(r.bin, r.args...)
			cmd.Env = env
			cmd.Stdin = bytes.NewReader(r.payload)
			cmd.Stdout = &out
			start := time.Now()
			err := cmd.Run()
			times[i] = append(times[i], time.Since(start))
			if err != nil || !bytes.HasPrefix(out.Bytes(), []byte(r.want)) {
				b.Fatalf("%s %v: %v, stdout %q", r.bin, r.args, err, out.String())
			}
		}
	}
	median := func(ts []time.Duration) time.Duration {
		slices.Sort(ts)
		return ts[len(ts)/2]
	}
	floor := median(times[len(runs)-1])
	for i, r := range runs {
		m := median(times[i])
		b.ReportMetric(float64(m.Microseconds())/1000, r.name+"-ms")
		if i < len(runs)-1 {
			b.ReportMetric(float64(m)/float64(floor), r.name+"-x")
		}
	}
}
