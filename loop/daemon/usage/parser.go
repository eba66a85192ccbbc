package usage

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/theloop-dev/theloop/harness"
)

// Words a line must hold to be worth decoding (most lines of a record are
// the conversation's text, tool calls and attachments).
var (
	wordAssistant  = []byte(`"assistant"`)
	wordTokenCount = []byte(`"token_count"`)
	wordTurnCtx    = []byte(`"turn_context"`)
	wordGemini     = []byte(`"gemini"`)
)

// Parser turns the lines of one harness's record into turns. A Parser is
// stateful (it drops a response the record repeats, and Codex's counts are
// running totals) and belongs to one record; it is not safe for
// concurrent use. Line never fails: a line it does not understand yields
// nothing.
type Parser interface {
	Line(line []byte) []Turn
}

// Harness names, as routing.defaultHarness spells them: the harnesses
// whose records theloop reads (their descriptors' names).
var (
	HarnessClaude = harness.Claude.Name
	HarnessCodex  = harness.Codex.Name
	HarnessGemini = harness.Gemini.Name
)

// NewParser returns the parser for harness's record; false when the
// harness keeps none theloop reads (cursor): its usage is unknown.
func NewParser(harness string) (Parser, bool) {
	switch harness {
	case HarnessClaude:
		return &claudeParser{seen: newRecent(recentIDs)}, true
	case HarnessCodex:
		return &codexParser{}, true
	case HarnessGemini:
		return &geminiParser{seen: newRecent(recentIDs)}, true
	}
	return nil, false
}

// recentIDs is how many response ids a parser remembers to drop repeats.
const recentIDs = 512

// recent is a bounded set of the last ids added.
type recent struct {
	ring []string
	next int
	set  map[string]struct{}
}

func newRecent(n int) *recent {
	return &recent{ring: make([]string, n), set: make(map[string]struct{}, n)}
}

// add reports whether id was new (and remembers it).
func (r *recent) add(id string) bool {
	if _, ok := r.set[id]; ok {
		return false
	}
	if old := r.ring[r.next]; old != "" {
		delete(r.set, old)
	}
	r.ring[r.next] = id
	r.next = (r.next + 1) % len(r.ring)
	r.set[id] = struct{}{}
	return true
}

func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t.UTC()
}

// --- Claude Code ------------------------------------------------------------

// claudeParser reads Claude Code's transcript
// (~/.claude/projects/<dir>/<session id>.jsonl): each assistant line carries
// the API response's message with its usage — input_tokens (not cached),
// cache_creation_input_tokens, cache_read_input_tokens, output_tokens. A
// response with several content blocks is written as several lines with
// the same message id (and request id): counted once.
type claudeParser struct{ seen *recent }

type claudeLine struct {
	Type      string `json:"type"`
	Timestamp string `json:"timestamp"`
	RequestID string `json:"requestId"`
	UUID      string `json:"uuid"`
	Message   *struct {
		ID    string `json:"id"`
		Model string `json:"model"`
		Usage *struct {
			Input      int64 `json:"input_tokens"`
			Output     int64 `json:"output_tokens"`
			CacheWrite int64 `json:"cache_creation_input_tokens"`
			CacheRead  int64 `json:"cache_read_input_tokens"`
		} `json:"usage"`
	} `json:"message"`
}

func (p *claudeParser) Line(line []byte) []Turn {
	if !bytes.Contains(line, wordAssistant) {
		return nil
	}
	var l claudeLine
	if json.Unmarshal(line, &l) != nil || l.Type != "assistant" || l.Message == nil || l.Message.Usage == nil {
		return nil
	}
	u := l.Message.Usage
	t := Turn{At: parseTime(l.Timestamp), Model: cleanModel(l.Message.Model),
		Tokens: Tokens{Input: u.Input, Output: u.Output, CacheWrite: u.CacheWrite, CacheRead: u.CacheRead}}
	if !t.Tokens.plausible() || l.Message.Model == "<synthetic>" {
		return nil
	}
	id := l.Message.ID + "\x00" + l.RequestID
	if l.Message.ID == "" {
		id = "uuid\x00" + l.UUID
	}
	if !p.seen.add(id) {
		return nil
	}
	return []Turn{t}
}

// --- Codex --------------------------------------------------------------------

// codexParser reads Codex's session log
// (~/.codex/sessions/YYYY/MM/DD/rollout-…-<thread id>.jsonl): the model
// from each turn_context line, the usage from each token_count event. The
// event carries the thread's running total (total_token_usage) and the
// last response's (last_token_usage); the running total is what counts
// (Codex repeats a token_count on rate-limit updates), its growth since
// the last event is the turn. Counts follow OpenAI's Responses API:
// input_tokens includes cached_input_tokens; output_tokens includes
// reasoning.
type codexParser struct {
	model string
	total codexUsage
	seen  bool
}

type codexUsage struct {
	Input      int64 `json:"input_tokens"`
	Cached     int64 `json:"cached_input_tokens"`
	CacheWrite int64 `json:"cache_write_input_tokens"`
	Output     int64 `json:"output_tokens"`
}

func (u codexUsage) sub(o codexUsage) codexUsage {
	return codexUsage{u.Input - o.Input, u.Cached - o.Cached, u.CacheWrite - o.CacheWrite, u.Output - o.Output}
}

func (u codexUsage) tokens() Tokens {
	return Tokens{Input: max(u.Input-u.Cached-u.CacheWrite, 0), Output: u.Output, CacheWrite: u.CacheWrite, CacheRead: u.Cached}
}

type codexLine struct {
	Timestamp string `json:"timestamp"`
	Type      string `json:"type"`
	Payload   struct {
		Type  string `json:"type"`
		Model string `json:"model"`
		Info  *struct {
			Total *codexUsage `json:"total_token_usage"`
			Last  *codexUsage `json:"last_token_usage"`
		} `json:"info"`
	} `json:"payload"`
}

func (p *codexParser) Line(line []byte) []Turn {
	if !bytes.Contains(line, wordTokenCount) && !bytes.Contains(line, wordTurnCtx) {
		return nil
	}
	var l codexLine
	if json.Unmarshal(line, &l) != nil {
		return nil
	}
	switch {
	case l.Type == "turn_context" && l.Payload.Model != "":
		p.model = cleanModel(l.Payload.Model)
		return nil
	case l.Type != "event_msg" || l.Payload.Type != "token_count" || l.Payload.Info == nil:
		return nil
	}
	info := l.Payload.Info
	var d codexUsage
	switch {
	case info.Total != nil:
		d = info.Total.sub(p.total)
		if d.Input < 0 || d.Cached < 0 || d.CacheWrite < 0 || d.Output < 0 {
			// The running total went down: a new thread in the same file
			// (or an edited one). Its last response is the turn.
			d = codexUsage{}
			if info.Last != nil {
				d = *info.Last
			}
		}
		p.total, p.seen = *info.Total, true
	case info.Last != nil:
		d = *info.Last
	}
	model := p.model
	if model == "" {
		model = "unknown"
	}
	t := Turn{At: parseTime(l.Timestamp), Model: model, Tokens: d.tokens()}
	if !t.Tokens.plausible() {
		return nil
	}
	return []Turn{t}
}

// --- Gemini CLI -----------------------------------------------------------------

// geminiParser reads the Gemini CLI's chat record
// (~/.gemini/tmp/<project>/chats/session-<time>-<id8>.jsonl): a header
// line, one line per message and "$set" lines that restate fields. Each
// model message ("type": "gemini") carries its tokens — input (the
// prompt, cached included), cached, output, thoughts (billed as output),
// tool (tool-use prompt, billed as input) — and its model. A message is
// counted once by its id; "$set" restatements are not counted.
type geminiParser struct{ seen *recent }

type geminiLine struct {
	ID        string `json:"id"`
	Timestamp string `json:"timestamp"`
	Type      string `json:"type"`
	Model     string `json:"model"`
	Tokens    *struct {
		Input    int64 `json:"input"`
		Output   int64 `json:"output"`
		Cached   int64 `json:"cached"`
		Thoughts int64 `json:"thoughts"`
		Tool     int64 `json:"tool"`
	} `json:"tokens"`
}

func (p *geminiParser) Line(line []byte) []Turn {
	if !bytes.Contains(line, wordGemini) {
		return nil
	}
	var l geminiLine
	if json.Unmarshal(line, &l) != nil || l.Type != "gemini" || l.Tokens == nil || l.ID == "" {
		return nil
	}
	k := l.Tokens
	if k.Input < 0 || k.Cached < 0 || k.Output < 0 || k.Thoughts < 0 || k.Tool < 0 {
		return nil
	}
	t := Turn{At: parseTime(l.Timestamp), Model: cleanModel(l.Model),
		Tokens: Tokens{Input: max(k.Input-k.Cached, 0) + k.Tool, Output: k.Output + k.Thoughts, CacheRead: k.Cached}}
	if !t.Tokens.plausible() || !p.seen.add(l.ID) {
		return nil
	}
	return []Turn{t}
}
