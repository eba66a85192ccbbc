package integrations

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/ops"
)

// slackOperations are the Slack operations (see package ops).
var slackOperations = []graph.Operation{ops.SlackPostMessage}

// Slack has no official Go SDK; both transports are plain net/http:
//
//   - api: Web API chat.postMessage with a bot token, to the configured
//     channel (or the call's channel argument);
//   - webhook: an incoming webhook, which posts only to the channel it was
//     created for.
//
// Posting is not idempotent, so neither transport retries a 5xx or a lost
// connection (a duplicate notification is worse than a recorded failure);
// both wait out a 429's Retry-After when it fits the call's deadline.

func (s *Set) newSlack(c SlackConfig, d Deps) *provider {
	p := &provider{name: "slack", timeout: timeoutOf(c.TimeoutSeconds)}
	tokenEnv := orDefault(c.API.TokenEnv, DefaultSlackBotTokenEnv)
	urlEnv := orDefault(c.Webhook.URLEnv, DefaultSlackWebhookURLEnv)
	registerEnv(s.red, d.Env, tokenEnv, urlEnv)
	tok := &secret{what: "Slack bot token", env: []string{tokenEnv}, fix: "export a bot token (xoxb-…) with the chat:write scope",
		lookup: d.Env, runner: d.Runner, red: s.red}
	hook := &secret{what: "Slack webhook URL", env: []string{urlEnv}, fix: "export the URL of a Slack incoming webhook",
		lookup: d.Env, runner: d.Runner, red: s.red}
	policy := &retryPolicy{service: "Slack", maxAttempts: attemptsOf(c.MaxAttempts), clock: d.Clock, sleep: d.Sleep,
		rateHint: "Slack allows about one message per second per channel"}

	transport := orDefault(c.Transport, TransportAuto)
	if transport == TransportAuto {
		switch {
		case tok.present():
			transport = TransportAPI
		case hook.present():
			transport = TransportWebhook
		default:
			p.transport = TransportAuto
			p.unavailable = failFinal(ErrProviderUnavailable,
				"slack transport auto: neither %s (transport api) nor %s (transport webhook) is set — export a bot token or an incoming-webhook URL", tokenEnv, urlEnv)
			return p
		}
	}
	p.transport = transport
	switch transport {
	case TransportAPI:
		if !tok.present() {
			p.unavailable = failFinal(ErrProviderUnavailable, "slack transport api: %s is not set — export a bot token with the chat:write scope, or use transport: webhook", tokenEnv)
			return p
		}
		if c.Channel == "" {
			p.unavailable = failFinal(ErrProviderUnavailable, "slack transport api: integrations.slack.channel is not set — name the channel to post to (e.g. \"#the-loop\" or a channel id)")
			return p
		}
		base, _ := serviceURL(orDefault(c.API.BaseURL, DefaultSlackBaseURL)) // validated
		a := &slackAPI{client: d.HTTPClient, endpoint: base.String() + "/chat.postMessage", token: tok, channel: c.Channel, policy: policy}
		p.ops = map[graph.Operation]opFunc{ops.SlackPostMessage: a.post}
	case TransportWebhook:
		if !hook.present() {
			p.unavailable = failFinal(ErrProviderUnavailable, "slack transport webhook: %s is not set — export the incoming webhook's URL, or use transport: api", urlEnv)
			return p
		}
		w := &slackWebhook{client: d.HTTPClient, url: hook, channel: c.Channel, policy: policy}
		p.ops = map[graph.Operation]opFunc{ops.SlackPostMessage: w.post}
	}
	return p
}

type slackAPI struct {
	client   *http.Client
	endpoint string
	token    *secret
	channel  string
	policy   *retryPolicy
}

// postArgs reads slack.post-message's arguments: text (required) and an
// optional channel.
func postArgs(args map[string]any) (text, channel string, err error) {
	if text, err = argString(args, "text", true); err != nil {
		return "", "", err
	}
	channel, err = argString(args, "channel", false)
	return text, channel, err
}

func (a *slackAPI) post(ctx context.Context, st *callState, args map[string]any) (map[string]any, error) {
	text, channel, err := postArgs(args)
	if err != nil {
		return nil, err
	}
	if channel == "" {
		channel = a.channel
	}
	tok, err := a.token.get(ctx)
	if err != nil {
		return nil, err
	}
	payload, _ := json.Marshal(map[string]string{"channel": channel, "text": text})
	h := http.Header{}
	h.Set("Authorization", "Bearer "+tok)
	h.Set("Content-Type", "application/json; charset=utf-8")
	resp, err := a.policy.do(ctx, st, false, httpAttempt(a.client, http.MethodPost, a.endpoint, h, payload))
	if err != nil {
		return nil, err
	}
	if resp.status/100 != 2 {
		return nil, &failure{kinds: []error{ErrRejected}, status: resp.status, msg: fmt.Sprintf("Slack answered HTTP %d", resp.status)}
	}
	ok, code, err := decodeSlackAnswer(resp.body)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, slackAPIFailure(code, channel, a.token.env[0])
	}
	return map[string]any{}, nil
}

// decodeSlackAnswer reads a Web API answer: {"ok": bool, "error": "code"}.
func decodeSlackAnswer(b []byte) (ok bool, code string, err error) {
	var ans struct {
		OK    bool   `json:"ok"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal(b, &ans); err != nil {
		return false, "", fail(ErrTransport, "Slack answered with malformed JSON: %v", jsonProblem(err))
	}
	return ans.OK, slackCode(ans.Error), nil
}

// slackCode keeps an error code printable: Slack's codes are snake_case.
func slackCode(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if r == '_' || (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		}
		if b.Len() >= 60 {
			break
		}
	}
	if b.Len() == 0 {
		return "unknown_error"
	}
	return b.String()
}

func slackAPIFailure(code, channel, tokenEnv string) *failure {
	switch code {
	case "not_in_channel":
		return fail(ErrForbidden, "Slack refused the message (not_in_channel) — invite the bot to %s", clip(channel, 80))
	case "channel_not_found":
		return fail(ErrNotFound, "Slack refused the message (channel_not_found) — check integrations.slack.channel (%s) and that the bot can see it", clip(channel, 80))
	case "invalid_auth", "not_authed", "token_revoked", "token_expired", "account_inactive":
		return fail(ErrUnauthorized, "Slack rejected the bot token (%s) — export a valid token in %s", code, tokenEnv)
	case "missing_scope":
		return fail(ErrForbidden, "Slack refused the message (missing_scope) — give the bot token the chat:write scope")
	case "ratelimited":
		return fail(ErrRateLimited, "Slack is rate limiting (ratelimited) — Slack allows about one message per second per channel")
	}
	return fail(ErrRejected, "Slack refused the message (%s)", code)
}

type slackWebhook struct {
	client  *http.Client
	url     *secret
	channel string
	policy  *retryPolicy
}

func (w *slackWebhook) post(ctx context.Context, st *callState, args map[string]any) (map[string]any, error) {
	text, channel, err := postArgs(args)
	if err != nil {
		return nil, err
	}
	if channel != "" && channel != w.channel {
		return nil, fail(ErrInvalidArgument, "an incoming webhook posts only to the channel it was created for; it cannot post to %s — drop the channel argument, or use transport: api", clip(channel, 80))
	}
	raw, err := w.url.get(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := serviceURL(raw); err != nil {
		// Never quote the URL: it is the credential.
		return nil, failFinal(ErrInvalidConfig, "the value of %s is not an https URL — export the incoming webhook's URL", w.url.env[0])
	}
	payload, _ := json.Marshal(map[string]string{"text": text})
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	resp, err := w.policy.do(ctx, st, false, httpAttempt(w.client, http.MethodPost, raw, h, payload))
	if err != nil {
		return nil, err
	}
	if resp.status/100 == 2 {
		return map[string]any{}, nil
	}
	code := slackCode(strings.TrimSpace(string(resp.body)))
	f := &failure{status: resp.status}
	switch {
	case code == "no_service" || code == "invalid_token" || resp.status == http.StatusGone:
		f.kinds = []error{ErrUnauthorized}
		f.msg = "Slack refused the webhook (" + code + ") — it was revoked or is invalid; create a new incoming webhook and export its URL in " + w.url.env[0]
	case code == "channel_not_found" || code == "channel_is_archived":
		f.kinds = []error{ErrNotFound}
		f.msg = "Slack refused the webhook (" + code + ") — its channel is gone; create a new incoming webhook"
	default:
		f.kinds = []error{ErrRejected}
		f.msg = fmt.Sprintf("Slack refused the webhook message (HTTP %d, %s)", resp.status, code)
	}
	return nil, f
}
