package usage

import "time"

// Kind is one kind of token a model bills separately.
type Kind string

// The kinds, as the counters and the API name them.
const (
	KindInput      Kind = "input"       // prompt tokens not read from a cache
	KindOutput     Kind = "output"      // generated tokens (reasoning included)
	KindCacheWrite Kind = "cache_write" // prompt tokens written to a cache
	KindCacheRead  Kind = "cache_read"  // prompt tokens read from a cache
)

// Kinds lists every Kind in a fixed order.
var Kinds = []Kind{KindInput, KindOutput, KindCacheWrite, KindCacheRead}

// Tokens counts tokens by kind.
type Tokens struct {
	Input      int64 `json:"input"`
	Output     int64 `json:"output"`
	CacheWrite int64 `json:"cacheWrite"`
	CacheRead  int64 `json:"cacheRead"`
}

// Add returns t + o.
func (t Tokens) Add(o Tokens) Tokens {
	return Tokens{t.Input + o.Input, t.Output + o.Output, t.CacheWrite + o.CacheWrite, t.CacheRead + o.CacheRead}
}

// Total is the sum over the kinds.
func (t Tokens) Total() int64 { return t.Input + t.Output + t.CacheWrite + t.CacheRead }

// Of returns the count of kind k.
func (t Tokens) Of(k Kind) int64 {
	switch k {
	case KindInput:
		return t.Input
	case KindOutput:
		return t.Output
	case KindCacheWrite:
		return t.CacheWrite
	case KindCacheRead:
		return t.CacheRead
	}
	return 0
}

// maxTurnTokens bounds one turn's count of one kind: a larger number in
// the record is not a model's answer (the largest context windows are a
// few million tokens) and the turn is dropped.
const maxTurnTokens = 100_000_000

// plausible reports whether every count is in [0, maxTurnTokens] and the
// turn counts anything.
func (t Tokens) plausible() bool {
	for _, k := range Kinds {
		if n := t.Of(k); n < 0 || n > maxTurnTokens {
			return false
		}
	}
	return t.Total() > 0
}

// Turn is one model response the record reports.
type Turn struct {
	// At is the record's timestamp (zero when it has none). It is the
	// agent's word: the daemon clamps it to when it read the turn.
	At     time.Time
	Model  string
	Tokens Tokens
}

// maxModelName bounds a model name taken from the record.
const maxModelName = 80

// cleanModel keeps a model name printable and short ("" → "unknown").
func cleanModel(s string) string {
	b := make([]byte, 0, min(len(s), maxModelName))
	for i := 0; i < len(s) && len(b) < maxModelName; i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == ':' || c == '/' || c == '@' || c == '[' || c == ']' {
			b = append(b, c)
		}
	}
	if len(b) == 0 {
		return "unknown"
	}
	return string(b)
}
