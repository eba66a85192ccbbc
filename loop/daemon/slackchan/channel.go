package slackchan

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/hooks"
	"github.com/theloop-dev/theloop/workitem"
)

// Modes (channels.slack.mode).
const (
	ModeEvents = "events"
	ModeSocket = "socket"
)

// Defaults of the channels.slack keys.
const (
	DefaultBotTokenEnv      = "THE_LOOP_SLACK_BOT_TOKEN"
	DefaultAppTokenEnv      = "THE_LOOP_SLACK_APP_TOKEN"
	DefaultSigningSecretEnv = "THE_LOOP_SLACK_SIGNING_SECRET"
	DefaultEventsPath       = "/slack/events"
	// Command is the slash command the channel answers.
	Command = "/the-loop"
)

// Verbs the slash command relays: the operator's session controls. None
// of them decides a gate.
var Verbs = []string{"start", "pause", "resume", "stop"}

// Config is the channel's part of loopd's configuration (channels.slack).
// The daemon reads the secrets from the environment; the *Env fields only
// name the variables in error messages.
type Config struct {
	// Mode is ModeEvents or ModeSocket.
	Mode string
	// Channel is where work items' threads are opened (a channel id, or a
	// name the bot can post to).
	Channel string
	// Users maps Slack user ids to GitHub logins (channels.slack.users).
	Users map[string]string
	// BotToken posts (chat.postMessage); AppToken opens Socket Mode;
	// SigningSecret verifies the Events API's requests.
	BotToken, AppToken string
	SigningSecret      []byte
	// BotTokenEnv, AppTokenEnv and SigningSecretEnv name their variables.
	BotTokenEnv, AppTokenEnv, SigningSecretEnv string
	// EventsPath is the Events API's path on loopd's webhook listener.
	EventsPath string
	// StateDir holds slack.json (thread bindings and handled event ids).
	StateDir string
	// APIURL is the Web API's base URL ("" = Slack's); tests point it at a
	// stand-in.
	APIURL string
	// HTTPClient makes the Web API calls (nil: http.DefaultClient).
	HTTPClient *http.Client
}

// Validate names the first setting that cannot work, and the fix. It fails
// closed: the Events API without a signing secret is refused.
func (c Config) Validate() error {
	switch {
	case c.Mode != ModeEvents && c.Mode != ModeSocket:
		return fmt.Errorf("channels.slack.mode: %q is not events or socket", c.Mode)
	case c.Channel == "":
		return errors.New("channels.slack.channel: is empty — name the channel (id or #name) where work items' threads open")
	case c.BotToken == "":
		return fmt.Errorf("channels.slack: %s is not set — export the bot token (xoxb-…, scopes chat:write and the channel's history) or set channels.slack.enabled: false", orDefault(c.BotTokenEnv, DefaultBotTokenEnv))
	case c.Mode == ModeEvents && len(c.SigningSecret) == 0:
		return fmt.Errorf("channels.slack.mode events: %s (channels.slack.signingSecretEnv) is not set — without the app's signing secret loopd cannot tell Slack's requests from forged ones, so the Events API endpoint is not served; export it, or use channels.slack.mode: socket: %w", orDefault(c.SigningSecretEnv, DefaultSigningSecretEnv), ErrNoSigningSecret)
	case c.Mode == ModeEvents && (c.EventsPath == "" || c.EventsPath[0] != '/'):
		return fmt.Errorf("channels.slack.eventsPath: %q must start with /", c.EventsPath)
	case c.Mode == ModeSocket && c.AppToken == "":
		return fmt.Errorf("channels.slack.mode socket: %s (channels.slack.appTokenEnv) is not set — export an app-level token (xapp-…, scope connections:write)", orDefault(c.AppTokenEnv, DefaultAppTokenEnv))
	case c.StateDir == "":
		return errors.New("slack channel: no state directory")
	}
	for id, login := range c.Users {
		if !slackUserID.MatchString(id) {
			return fmt.Errorf("channels.slack.users: %q is not a Slack user id (U… or W…, from the member's profile → Copy member ID)", clip(id, 40))
		}
		if login == "" {
			return fmt.Errorf("channels.slack.users.%s: is empty — name the person's GitHub login", id)
		}
	}
	return nil
}

// slackUnescape undoes the three escapes Slack applies to message text
// (https://api.slack.com/reference/surfaces/formatting#escaping), so the
// session and the ticket read what the person typed.
var slackUnescape = strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&")

var slackUserID = regexp.MustCompile(`^[UW][A-Z0-9]{2,20}$`)

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// Person is who spoke in Slack: the Slack user and the GitHub login it is
// mapped to.
type Person struct {
	SlackUser, Login string
}

// String is how the person is named in audit lines and comments.
func (p Person) String() string {
	return fmt.Sprintf("Slack user %s (GitHub @%s)", p.SlackUser, p.Login)
}

// Backend is what the channel asks of loopd. Every method is called with a
// person already mapped; Authorized is asked first and a false answer stops
// everything.
type Backend interface {
	// Authorized returns "" when the GitHub login may act on item by
	// loopd's rules (routing.authorizedUsers, routing.authorized), else why
	// not, in a sentence.
	Authorized(ctx context.Context, login string, item workitem.Ref) string
	// Comment posts a marked comment on the work item (a marked comment is
	// dropped by every ingress: it never acts as a keyword or decision) and
	// returns its URL ("" when unknown).
	Comment(ctx context.Context, item workitem.Ref, body string) (string, error)
	// Reply pastes text into the item's live session as from the person,
	// through the operator-reply path. It refuses a control keyword.
	Reply(ctx context.Context, item workitem.Ref, from Person, text string) error
	// Control applies start, pause, resume or stop as the person, as
	// `loopctl sessions <verb>` does, and returns the effect.
	Control(ctx context.Context, item workitem.Ref, from Person, verb string) (string, error)
}

// Deps is the channel's world.
type Deps struct {
	Backend Backend
	// Now is the clock (one clock per world: the daemon's).
	Now func() time.Time
	// Record writes an audit/log line (the daemon's event log).
	Record func(name string, level graph.Level, fields ...graph.Field)
}

// Channel is the running Slack channel. Close stops what Start started.
type Channel struct {
	cfg  Config
	deps Deps
	api  *slack.Client
	st   *store

	// openMu serializes OpenThread, so one item never gets two parents.
	openMu sync.Mutex
	mu     sync.Mutex
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New validates cfg and opens the bindings; it starts nothing.
func New(cfg Config, deps Deps) (*Channel, error) {
	if cfg.EventsPath == "" {
		cfg.EventsPath = DefaultEventsPath
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Backend == nil {
		return nil, errors.New("slack channel: no backend")
	}
	if deps.Now == nil {
		return nil, errors.New("slack channel: no clock (Deps.Now)")
	}
	if deps.Record == nil {
		deps.Record = func(string, graph.Level, ...graph.Field) {}
	}
	st, err := openStore(cfg.StateDir, deps.Now())
	if err != nil {
		return nil, err
	}
	opts := []slack.Option{}
	if cfg.APIURL != "" {
		u := cfg.APIURL
		if !strings.HasSuffix(u, "/") {
			u += "/"
		}
		opts = append(opts, slack.OptionAPIURL(u))
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, slack.OptionHTTPClient(cfg.HTTPClient))
	}
	if cfg.Mode == ModeSocket {
		opts = append(opts, slack.OptionAppLevelToken(cfg.AppToken))
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Channel{cfg: cfg, deps: deps, api: slack.New(cfg.BotToken, opts...), st: st, ctx: ctx, cancel: cancel}, nil
}

// Mode is the channel's mode.
func (c *Channel) Mode() string { return c.cfg.Mode }

// EventsPath is where Handler is mounted (events mode).
func (c *Channel) EventsPath() string { return c.cfg.EventsPath }

// Start connects Socket Mode (in events mode there is nothing to start:
// mount Handler). It returns at once; Close stops it.
func (c *Channel) Start() {
	if c.cfg.Mode != ModeSocket {
		return
	}
	sm := socketmode.New(c.api, socketmode.OptionLog(discardLogger{}))
	c.wg.Add(2)
	go func() {
		defer c.wg.Done()
		// RunContext returns only with an error (the context's, on Close).
		if err := sm.RunContext(c.ctx); c.ctx.Err() == nil {
			c.record("channel.slack.socket_stopped", graph.LevelError, graph.Field{Key: "error", Value: err.Error()})
		}
	}()
	go func() {
		defer c.wg.Done()
		c.socketLoop(sm)
	}()
}

// Close stops Socket Mode and waits for every event being handled.
func (c *Channel) Close() error {
	c.mu.Lock()
	c.cancel()
	c.mu.Unlock()
	c.wg.Wait()
	return nil
}

// Thread returns a work item's bound thread.
func (c *Channel) Thread(item workitem.Ref) (Thread, bool) { return c.st.thread(item.String()) }

// OpenThread opens the work item's thread, or returns the one already
// bound (a respawn or a restart reuses it). The parent's ts is on disk
// before OpenThread returns.
func (c *Channel) OpenThread(ctx context.Context, item workitem.Ref) (Thread, error) {
	c.openMu.Lock()
	defer c.openMu.Unlock()
	if t, ok := c.st.thread(item.String()); ok {
		return t, nil
	}
	link := item.String()
	if u := item.URL(); u != "" {
		link = "<" + u + "|" + item.String() + ">"
	}
	text := fmt.Sprintf(":repeat: the-loop started a session for %s. Reply in this thread to talk to the agent (people listed in channels.slack.users and authorized on the ticket only). Gates are decided on the ticket, not here.", link)
	ch, ts, err := c.api.PostMessageContext(ctx, c.cfg.Channel, slack.MsgOptionText(text, false))
	if err != nil {
		c.record("channel.slack.thread_failed", graph.LevelWarning, graph.Field{Key: "work_item", Value: item.String()}, graph.Field{Key: "error", Value: err.Error()})
		return Thread{}, fmt.Errorf("slack channel: opening %s's thread in %s: %w", item, c.cfg.Channel, err)
	}
	t := Thread{Channel: ch, TS: ts}
	if err := c.st.bind(item.String(), t); err != nil {
		return Thread{}, err
	}
	c.record("channel.slack.thread_opened", graph.LevelInfo, graph.Field{Key: "work_item", Value: item.String()},
		graph.Field{Key: "channel", Value: ch}, graph.Field{Key: "thread_ts", Value: ts})
	return t, nil
}

// OpenThreadInBackground is OpenThread under the channel's lifetime (Close
// waits for it); its failure is recorded, not returned.
func (c *Channel) OpenThreadInBackground(item workitem.Ref) {
	c.goHandle(func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		_, _ = c.OpenThread(ctx, item)
	})
}

// handleMessage is the one pipeline for a message event, from either
// mode; eventID has already been recorded as handled.
func (c *Channel) handleMessage(ctx context.Context, eventID string, m *message) {
	if !m.threadReply() {
		return
	}
	ref, ok := c.st.itemOf(m.Channel, m.ThreadTS)
	if !ok {
		return // not one of our threads
	}
	item, err := workitem.Parse(ref)
	if err != nil {
		return
	}
	base := []graph.Field{{Key: "work_item", Value: ref}, {Key: "slack_user", Value: m.User}, {Key: "event_id", Value: eventID}}
	p, why := c.person(ctx, m.User, item)
	if why != "" {
		c.record("channel.slack.dropped", graph.LevelWarning, append(base, graph.Field{Key: "reason", Value: why})...)
		return
	}
	base = append(base, graph.Field{Key: "login", Value: p.Login})
	text := strings.TrimSpace(slackUnescape.Replace(m.Text))
	decision := hooks.Classify([]string{text})
	// The ticket is the record: the mirror comes first. It is marked, so no
	// ingress reads it as a keyword or a decision.
	url, err := c.deps.Backend.Comment(ctx, item, mirrorBody(p, text, decision != ""))
	if err != nil {
		c.record("channel.slack.mirror_failed", graph.LevelWarning, append(base, graph.Field{Key: "error", Value: err.Error()})...)
	}
	c.record("channel.slack.reply", graph.LevelInfo, append(base, graph.Field{Key: "mirrored", Value: url})...)
	var notes []string
	if decision != "" {
		notes = append(notes, fmt.Sprintf("<@%s> a decision in Slack passes no gate: loopd posts nothing as you on GitHub. To decide, comment on the ticket as @%s: %s", p.SlackUser, p.Login, ticketLink(item)))
		c.record("channel.slack.decision_relayed", graph.LevelInfo, append(base, graph.Field{Key: "outcome", Value: decision})...)
	}
	if err := c.deps.Backend.Reply(ctx, item, p, text); err != nil {
		c.record("channel.slack.delivery_failed", graph.LevelWarning, append(base, graph.Field{Key: "error", Value: err.Error()})...)
		notes = append(notes, fmt.Sprintf("<@%s> not delivered to the session: %s", p.SlackUser, clip(err.Error(), 300)))
	} else {
		c.record("channel.slack.delivered", graph.LevelInfo, base...)
	}
	if len(notes) > 0 {
		c.post(ctx, m.Channel, m.ThreadTS, strings.Join(notes, "\n"))
	}
}

// person maps a Slack user to a GitHub login that may act on item; why
// is the reason when it does not.
func (c *Channel) person(ctx context.Context, slackUser string, item workitem.Ref) (Person, string) {
	login, ok := c.cfg.Users[slackUser]
	if !ok {
		return Person{}, "unmapped Slack user (not in channels.slack.users)"
	}
	if why := c.deps.Backend.Authorized(ctx, login, item); why != "" {
		return Person{}, why
	}
	return Person{SlackUser: slackUser, Login: login}, ""
}

// mirrorBody is the ticket comment that records a Slack reply. It quotes
// the text (so nothing in it reads as the comment's own words) and says
// who spoke and that it decides nothing.
func mirrorBody(p Person, text string, decisive bool) string {
	var b strings.Builder
	for _, line := range strings.Split(clip(text, 4000), "\n") {
		b.WriteString("> " + line + "\n")
	}
	fmt.Fprintf(&b, "\n_Relayed from Slack: %s, posted by loopd (not by @%s). A relayed message decides no gate", p, p.Login)
	if decisive {
		fmt.Fprintf(&b, " — @%s, to decide, comment here yourself", p.Login)
	}
	b.WriteString("._")
	return hooks.Mark(b.String())
}

func ticketLink(item workitem.Ref) string {
	if u := item.URL(); u != "" {
		return u
	}
	return item.String()
}

// notAuthorized answers a person loopd's rules do not let act (the
// reason is in the event log, not told to the person).
const notAuthorized = "Not relayed: you are not an authorized user of this loopd for that item (ask its operator to map your Slack id in channels.slack.users to your GitHub login, and to allow that login in routing.authorizedUsers or routing.authorized)."

// handleSlash runs a /the-loop command and returns the text answered to
// the person (ephemeral).
func (c *Channel) handleSlash(ctx context.Context, cmd slack.SlashCommand) string {
	fields := strings.Fields(cmd.Text)
	usage := fmt.Sprintf("usage: %s start|pause|resume|stop OWNER/REPO#N (decisions are made on the ticket)", Command)
	base := []graph.Field{{Key: "slack_user", Value: cmd.UserID}, {Key: "command", Value: clip(cmd.Text, 200)}}
	if _, mapped := c.cfg.Users[cmd.UserID]; !mapped {
		c.record("channel.slack.dropped", graph.LevelWarning, append(base, graph.Field{Key: "reason", Value: "unmapped Slack user (not in channels.slack.users)"})...)
		return notAuthorized
	}
	if len(fields) != 2 {
		return usage
	}
	verb := strings.ToLower(fields[0])
	ref := fields[1]
	if !strings.Contains(ref, ":") {
		ref = "github:" + ref
	}
	item, err := workitem.Parse(ref)
	if err != nil {
		return "Not relayed: " + clip(err.Error(), 200) + "\n" + usage
	}
	p, why := c.person(ctx, cmd.UserID, item)
	if why != "" {
		c.record("channel.slack.dropped", graph.LevelWarning, append(base, graph.Field{Key: "work_item", Value: item.String()}, graph.Field{Key: "reason", Value: why})...)
		return notAuthorized
	}
	base = append(base, graph.Field{Key: "login", Value: p.Login}, graph.Field{Key: "work_item", Value: item.String()})
	if !slices.Contains(Verbs, verb) {
		if hooks.Classify([]string{cmd.Text}) != "" || verb == "approve" || verb == "reject" {
			c.record("channel.slack.decision_relayed", graph.LevelInfo, base...)
			return fmt.Sprintf("A decision in Slack passes no gate: loopd posts nothing as you on GitHub. To decide, comment on the ticket as @%s: %s", p.Login, ticketLink(item))
		}
		return usage
	}
	c.record("channel.slack.control", graph.LevelInfo, append(base, graph.Field{Key: "verb", Value: verb})...)
	// Slack wants the answer within 3 s; a stop that waits out the
	// harness's grace takes longer. The outcome is answered inline when it
	// comes in time, else posted to the person (ephemeral) when it comes.
	done := make(chan string, 1)
	c.goHandle(func(ctx context.Context) {
		effect, err := c.deps.Backend.Control(ctx, item, p, verb)
		if err != nil {
			c.record("channel.slack.control_failed", graph.LevelWarning, append(base, graph.Field{Key: "verb", Value: verb}, graph.Field{Key: "error", Value: err.Error()})...)
			done <- fmt.Sprintf("%s %s refused: %s", verb, item, clip(err.Error(), 300))
			return
		}
		done <- fmt.Sprintf("%s %s: %s (as @%s; recorded on the ticket: %s)", verb, item, effect, p.Login, ticketLink(item))
	})
	select {
	case text := <-done:
		return text
	case <-time.After(slashPatience):
	case <-ctx.Done():
	}
	c.goHandle(func(ctx context.Context) {
		text := <-done
		if _, err := c.api.PostEphemeralContext(ctx, cmd.ChannelID, cmd.UserID, slack.MsgOptionText(text, false)); err != nil {
			c.record("channel.slack.post_failed", graph.LevelWarning, graph.Field{Key: "channel", Value: cmd.ChannelID}, graph.Field{Key: "error", Value: err.Error()})
		}
	})
	return fmt.Sprintf("%s %s relayed as @%s; still in progress — the outcome follows here", verb, item, p.Login)
}

// slashPatience is how long a slash command's answer waits for the
// effect, inside Slack's 3-second limit.
const slashPatience = 2 * time.Second

// post answers in a thread, best effort.
func (c *Channel) post(ctx context.Context, channel, threadTS, text string) {
	if _, _, err := c.api.PostMessageContext(ctx, channel, slack.MsgOptionText(text, false), slack.MsgOptionTS(threadTS)); err != nil {
		c.record("channel.slack.post_failed", graph.LevelWarning, graph.Field{Key: "channel", Value: channel}, graph.Field{Key: "error", Value: err.Error()})
	}
}

func (c *Channel) record(name string, level graph.Level, fields ...graph.Field) {
	c.deps.Record(name, level, fields...)
}

// goHandle runs fn in the background under the channel's lifetime.
func (c *Channel) goHandle(fn func(ctx context.Context)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx.Err() != nil {
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), 2*time.Minute)
		defer cancel()
		fn(ctx)
	}()
}

// discardLogger silences slack-go's own logger: the channel records what
// matters through Deps.Record.
type discardLogger struct{}

func (discardLogger) Output(int, string) error { return nil }

// PostNotice posts one of loopd's notifications: in the work item's thread
// (opened if none is bound yet), or at the channel's top level when item
// is zero. text is loopd's own composition; nothing of an event's payload.
func (c *Channel) PostNotice(ctx context.Context, item workitem.Ref, text string) error {
	if item.IsZero() {
		if _, _, err := c.api.PostMessageContext(ctx, c.cfg.Channel, slack.MsgOptionText(text, false)); err != nil {
			return fmt.Errorf("slack channel: posting to %s: %w", c.cfg.Channel, err)
		}
		return nil
	}
	t, err := c.OpenThread(ctx, item)
	if err != nil {
		return err
	}
	if _, _, err := c.api.PostMessageContext(ctx, t.Channel, slack.MsgOptionText(text, false), slack.MsgOptionTS(t.TS)); err != nil {
		return fmt.Errorf("slack channel: posting in %s's thread: %w", item, err)
	}
	return nil
}
