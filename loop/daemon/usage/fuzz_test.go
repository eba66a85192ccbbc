package usage

import "testing"

// fuzzParser feeds arbitrary lines to a harness's parser: it must never
// panic, and whatever it returns is a plausible turn.
func fuzzParser(f *testing.F, harness string, seeds []string) {
	for _, s := range seeds {
		f.Add([]byte(s), []byte(seeds[0]))
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		p, _ := NewParser(harness)
		for _, l := range [][]byte{a, b, a} {
			for _, tr := range p.Line(l) {
				if !tr.Tokens.plausible() || tr.Model == "" || len(tr.Model) > maxModelName {
					t.Fatalf("implausible turn %+v from %q", tr, l)
				}
			}
		}
	})
}

func FuzzClaudeTranscript(f *testing.F) { fuzzParser(f, HarnessClaude, claudeSeeds) }
func FuzzCodexSessionLog(f *testing.F)  { fuzzParser(f, HarnessCodex, codexSeeds) }
func FuzzGeminiChatRecord(f *testing.F) { fuzzParser(f, HarnessGemini, geminiSeeds) }
