package slackchan

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"

	"github.com/theloop-dev/theloop/graph"
)

// socketLoop handles Socket Mode's events until Close. Every envelope is
// acknowledged (Slack redelivers an unacknowledged one); an events_api
// payload goes through the same parser, ledger and pipeline as an Events
// API request; a slash command is answered in its acknowledgement.
func (c *Channel) socketLoop(sm *socketmode.Client) {
	for {
		select {
		case <-c.ctx.Done():
			return
		case evt, ok := <-sm.Events:
			if !ok {
				return
			}
			c.socketEvent(sm, evt)
		}
	}
}

func (c *Channel) socketEvent(sm *socketmode.Client, evt socketmode.Event) {
	switch evt.Type {
	case socketmode.EventTypeConnected:
		c.record("channel.slack.socket_connected", graph.LevelInfo)
	case socketmode.EventTypeInvalidAuth:
		c.record("channel.slack.socket_invalid_auth", graph.LevelError, graph.Field{Key: "fix", Value: "check the app-level token (xapp-…, connections:write) in " + orDefault(c.cfg.AppTokenEnv, DefaultAppTokenEnv)})
	case socketmode.EventTypeConnectionError:
		c.record("channel.slack.socket_error", graph.LevelWarning)
	case socketmode.EventTypeEventsAPI:
		if evt.Request == nil {
			return
		}
		_ = sm.AckCtx(c.ctx, evt.Request.EnvelopeID, nil)
		env, err := parseEnvelope(evt.Request.Payload)
		if err != nil {
			c.record("channel.slack.malformed", graph.LevelWarning, graph.Field{Key: "error", Value: err.Error()})
			return
		}
		if env.Type != typeEventCallback || !c.firstSight(env.EventID, strconv.Itoa(evt.Request.RetryAttempt)) {
			return
		}
		if env.Message != nil {
			m := env.Message
			c.goHandle(func(ctx context.Context) { c.handleMessage(ctx, env.EventID, m) })
		}
	case socketmode.EventTypeSlashCommand:
		if evt.Request == nil {
			return
		}
		cmd, ok := evt.Data.(slack.SlashCommand)
		text := "already handled"
		switch {
		case !ok || cmd.Command != Command:
			text = "not a " + Command + " command"
		case cmd.TriggerID == "" || !printableID(cmd.TriggerID):
			text = "slash command without a trigger_id"
		case c.firstSight("slash:"+cmd.TriggerID, strconv.Itoa(evt.Request.RetryAttempt)):
			text = c.handleSlash(c.ctx, cmd)
		}
		_ = sm.AckCtx(c.ctx, evt.Request.EnvelopeID, map[string]string{"response_type": "ephemeral", "text": text})
	case socketmode.EventTypeErrorBadMessage:
		// slack-go could not read the envelope (an inner event type it does
		// not know): acknowledge it anyway, or Slack redelivers it forever.
		bad, _ := evt.Data.(*socketmode.ErrorBadMessage)
		if bad == nil {
			return
		}
		var head struct {
			EnvelopeID string `json:"envelope_id"`
		}
		if json.Unmarshal(bad.Message, &head) == nil && head.EnvelopeID != "" && printableID(head.EnvelopeID) {
			_ = sm.AckCtx(c.ctx, head.EnvelopeID, nil)
		}
		c.record("channel.slack.malformed", graph.LevelWarning, graph.Field{Key: "error", Value: clip(bad.Cause.Error(), 300)})
	default:
		if evt.Request != nil && evt.Request.EnvelopeID != "" {
			_ = sm.AckCtx(c.ctx, evt.Request.EnvelopeID, nil)
		}
	}
}
