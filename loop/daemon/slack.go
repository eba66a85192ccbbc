package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/hooks"
	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/loop/daemon/apiserver"
	"github.com/theloop-dev/theloop/loop/daemon/slackchan"
	"github.com/theloop-dev/theloop/ops"
	"github.com/theloop-dev/theloop/workitem"
)

// The Slack channel's assembly (docs/daemon.md §11.5): slackchan does the
// Slack side; the daemon is its Backend — the allowlist, the ticket
// comment, the operator-reply path and the session controls — so a word
// from Slack goes through exactly the paths a ticket keyword or
// `loopctl sessions …` would, never around them.

// SlackDir is where the channel keeps slack.json under the state root.
func SlackDir(stateRoot string) string { return filepath.Join(stateRoot, "channels") }

// slackConfig maps channels.slack onto the channel's configuration,
// reading the secrets from the environment. Disabled: nil. A channel that
// cannot work (no bot token, events without a signing secret, socket
// without an app token) is an invalid configuration: loopd does not start.
func slackConfig(sc loop.SlackSettings, stateRoot string, getenv func(string) string) (*slackchan.Config, error) {
	if !sc.Enabled {
		return nil, nil
	}
	c := &slackchan.Config{
		Mode: sc.Mode, Channel: sc.Channel, Users: sc.Users,
		BotToken: getenv(sc.BotTokenEnv), AppToken: getenv(sc.AppTokenEnv), SigningSecret: []byte(getenv(sc.SigningSecretEnv)),
		BotTokenEnv: sc.BotTokenEnv, AppTokenEnv: sc.AppTokenEnv, SigningSecretEnv: sc.SigningSecretEnv,
		EventsPath: sc.EventsPath, StateDir: SlackDir(stateRoot),
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", err, loop.ErrInvalidConfig)
	}
	return c, nil
}

// openSlack opens the channel when configured (nil c: off), its Backend
// the operator's desk.
func openSlack(c *slackchan.Config, stateRoot string, client *http.Client, desk *operatorDesk) (*slackchan.Channel, error) {
	if c == nil {
		return nil, nil
	}
	cc := *c
	if cc.StateDir == "" {
		cc.StateDir = SlackDir(stateRoot)
	}
	if cc.HTTPClient == nil {
		cc.HTTPClient = client
	}
	ch, err := slackchan.New(cc, slackchan.Deps{Backend: slackBackend{desk}, Now: desk.now, Record: desk.emit})
	if err != nil {
		return nil, fmt.Errorf("daemon: %w", err)
	}
	return ch, nil
}

// slackHandler serves the Events API beside the webhook receiver on the
// same listener (mode events), or is next itself.
func slackHandler(ch *slackchan.Channel, next http.Handler) http.Handler {
	if ch == nil || ch.Mode() != slackchan.ModeEvents {
		return next
	}
	path, events := ch.EventsPath(), ch.Handler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == path {
			events.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// SlackThread is the work item's Slack thread, when the channel is on and
// one is bound.
func (d *Daemon) SlackThread(item workitem.Ref) (slackchan.Thread, bool) {
	if d.slack == nil {
		return slackchan.Thread{}, false
	}
	return d.slack.Thread(item)
}

// slackBackend is the operator's desk as the Slack channel's Backend.
type slackBackend struct{ d *operatorDesk }

func (b slackBackend) Authorized(ctx context.Context, login string, item workitem.Ref) string {
	d := b.d
	d.policy.RLock()
	defer d.policy.RUnlock()
	if _, err := d.authorizedOperator(ctx, "github:"+login, "speak from Slack", item); err != nil {
		return err.Error()
	}
	return ""
}

func (b slackBackend) Comment(ctx context.Context, item workitem.Ref, body string) (string, error) {
	out, err := b.d.integ.Call(ctx, ops.GitHubAddComment, map[string]any{"ref": item.String(), "body": body})
	if err != nil {
		return "", err
	}
	u, _ := out["url"].(string)
	return u, nil
}

// Reply goes through the operator-reply path: the allowlist again, the
// control-keyword refusal, a live session, the verified paste, the event
// log. The paste opens with a line naming the person and Slack, so the
// agent knows this is not the ticket.
func (b slackBackend) Reply(ctx context.Context, item workitem.Ref, from slackchan.Person, text string) error {
	mark := func(login string) string {
		return "[message from @" + login + " (Slack user " + from.SlackUser + ") via Slack and loopd, not from the ticket]"
	}
	_, err := b.d.replyVia(ctx, item.String(), "github:"+from.Login, text, mark,
		[]graph.Field{{Key: "via", Value: "slack"}, {Key: "slack_user", Value: from.SlackUser}})
	return err
}

// Control applies a slash command's verb through the paths `loopctl
// sessions start|pause|resume|stop` take, as the person's GitHub login:
// start is queued as the ticket's start keyword (spawn policy, lease and
// control record apply); pause, resume and stop are recorded and applied.
// The announcement on the ticket is loopd's marked comment naming the Slack
// user and the login. None of these verbs decides a gate.
func (b slackBackend) Control(ctx context.Context, item workitem.Ref, from slackchan.Person, verb string) (string, error) {
	d := b.d
	actor := "github:" + from.Login
	if why := b.Authorized(ctx, from.Login, item); why != "" {
		return "", fmt.Errorf("%w: %s", apiserver.ErrForbidden, why)
	}
	d.emit("control.slack", graph.LevelInfo, graph.Field{Key: "work_item", Value: item.String()}, graph.Field{Key: "command", Value: verb},
		graph.Field{Key: "slack_user", Value: from.SlackUser}, graph.Field{Key: "actor", Value: actor})
	var effect string
	switch verb {
	case string(ingress.CmdStart):
		res, err := d.queueControl(ctx, item.String(), actor, ingress.CmdStart, true)
		if err != nil {
			return "", err
		}
		effect = res.Effect
	case string(ingress.CmdPause), string(ingress.CmdResume), string(ingress.CmdStop):
		res, err := d.ControlSession(ctx, item.String(), verb, actor, true)
		if err != nil {
			return "", err
		}
		effect = res.Effect
	default:
		return "", errors.New("slack: unknown verb " + verb)
	}
	kw := d.cfg.Routing.Keywords[verb]
	if kw == "" {
		kw = "the-loop " + verb
	}
	body := hooks.Mark(fmt.Sprintf("%s\n\n_Issued from Slack by %s (effect: %s)._", kw, from, effect))
	if _, err := d.integ.Call(ctx, ops.GitHubAddComment, map[string]any{"ref": item.String(), "body": body}); err != nil {
		d.emit("control.announce_failed", graph.LevelWarning, graph.Field{Key: "work_item", Value: item.String()}, graph.Field{Key: "command", Value: verb}, graph.Field{Key: "error", Value: err.Error()})
	}
	return effect, nil
}

var _ slackchan.Backend = slackBackend{}
