package telegram

import "time"

// LastPoll is when getUpdates (or, before it, getMe) last answered, for the
// host's readiness: a poll that stopped answering means messages no longer
// arrive, whatever else still works.
func (c *Client) LastPoll() time.Time {
	return time.Unix(0, c.lastPoll.Load())
}

// PollWindow is the longest a healthy poll goes without an answer: one
// long poll plus a little slack.
func (c *Client) PollWindow() time.Duration { return c.pollTimeout + pollSlack }

// pollSlack is how late a long poll may answer and still count as healthy:
// Telegram answers an idle poll when its timeout ends, so a few seconds
// cover the network; the request deadline (requestTimeout) is far longer.
const pollSlack = 10 * time.Second
