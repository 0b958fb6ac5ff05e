// Package telegram is clawpen's adapter to the Telegram Bot API, built on
// github.com/go-telegram/bot. It long-polls with an offset the caller persists (so no
// update is lost across restarts), decodes the messages clawpen cares about, and
// sends answers split, formatted, paced and retried the way Telegram wants.
//
// Privacy: nothing here logs message text — only chat ids, update ids and lengths.
package telegram

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
)

// DefaultPollTimeout is how long one getUpdates long poll waits on the server.
const DefaultPollTimeout = 25 * time.Second

// requestTimeout bounds every call but getUpdates, whose bound is its poll timeout.
const requestTimeout = 30 * time.Second

// ErrTokenRefused is New's error when the Bot API does not know the token:
// 401 for a revoked or mistyped one, 404 for one not shaped like a token.
var ErrTokenRefused = errors.New("the token is refused by Telegram")

// ErrUnreachable is New's error when getMe got no answer from the Bot API
// (the network, a dropped connection, a server error): worth trying again.
var ErrUnreachable = errors.New("the Bot API did not answer")

// Config configures a Client.
type Config struct {
	Token       string        // bot token (required)
	APIURL      string        // Bot API base URL (required; config has the default); requests go to <APIURL>/bot<token>/<method>
	HTTPClient  *http.Client  // optional; per-request deadlines come from contexts, so it needs no Timeout
	Logger      *slog.Logger  // optional; default slog.Default()
	PollTimeout time.Duration // long-poll wait, whole seconds (rounded up); default 25s
	Pacing      Pacing        // optional overrides of the send rate limits
}

// Client talks to one bot. Its methods are safe for concurrent use; Send calls for the
// same chat should not overlap if their order matters.
type Client struct {
	b           *bot.Bot
	token       string
	apiURL      string
	http        *http.Client
	log         *slog.Logger
	pollTimeout time.Duration
	lastPoll    *atomic.Int64 // unix nanoseconds of getUpdates' last answer (LastPoll)
	pace        *pacer
	botID       int64
	username    string
}

// New checks the token with getMe and returns a ready Client.
func New(ctx context.Context, cfg Config) (*Client, error) {
	if strings.TrimSpace(cfg.Token) == "" {
		return nil, errors.New("telegram: empty bot token")
	}
	c := &Client{
		token:       cfg.Token,
		apiURL:      strings.TrimRight(cfg.APIURL, "/"),
		http:        cfg.HTTPClient,
		log:         cfg.Logger,
		pollTimeout: cfg.PollTimeout,
		pace:        newPacer(cfg.Pacing),
		lastPoll:    new(atomic.Int64),
	}
	if u, err := url.Parse(c.apiURL); err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("telegram: API URL %q is not an http(s) URL", cfg.APIURL)
	}
	if c.http == nil {
		c.http = &http.Client{}
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	c.log = c.log.With("component", "telegram")
	if c.pollTimeout <= 0 {
		c.pollTimeout = DefaultPollTimeout
	}
	if rem := c.pollTimeout % time.Second; rem != 0 {
		c.pollTimeout += time.Second - rem
	}

	b, err := bot.New(cfg.Token,
		bot.WithServerURL(c.apiURL),
		bot.WithHTTPClient(c.pollTimeout, c.http),
		bot.WithSkipGetMe(), // we call getMe ourselves, with the caller's context
		bot.WithErrorsHandler(func(err error) {
			c.log.Warn("telegram library error", "err", c.redact(err))
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("telegram: create client: %w", err)
	}
	c.b = b

	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	me, err := b.GetMe(rctx)
	if errors.Is(err, bot.ErrorUnauthorized) || errors.Is(err, bot.ErrorNotFound) {
		return nil, fmt.Errorf("telegram: getMe: %w (%w)", ErrTokenRefused, c.redact(err))
	}
	if err != nil {
		return nil, fmt.Errorf("telegram: getMe: %w (%w)", ErrUnreachable, c.redact(err))
	}
	c.botID, c.username = me.ID, me.Username
	// Telegram answered: ready from now, not only after the first long
	// poll ends (an idle one waits the whole poll timeout).
	c.lastPoll.Store(time.Now().UnixNano())
	c.log.Info("connected", "bot_id", c.botID, "username", c.username)
	return c, nil
}

// Username is the bot's @username (without the @).
func (c *Client) Username() string { return c.username }

// BotID is the bot's user id.
func (c *Client) BotID() int64 { return c.botID }

// Typing shows "typing…" in the chat (and topic) for a few seconds.
func (c *Client) Typing(ctx context.Context, chatID int64, threadID int) error {
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	_, err := c.b.SendChatAction(rctx, &bot.SendChatActionParams{
		ChatID: chatID, MessageThreadID: threadID, Action: models.ChatActionTyping,
	})
	if err != nil {
		return fmt.Errorf("telegram: typing in chat %d: %w", chatID, c.redact(err))
	}
	return nil
}

// Command is one entry of the bot's command menu.
type Command struct {
	Name        string // without the slash, lowercase
	Description string
}

// SetCommandMenu shows cmds as the command menu of the owner's private
// chat (BotCommandScopeChat) and of no other chat: the default menu, which
// every chat sees, is cleared (also of an older version's admin commands).
// ownerChat 0 (no owner paired yet) clears only.
func (c *Client) SetCommandMenu(ctx context.Context, ownerChat int64, cmds []Command) error {
	list := make([]models.BotCommand, 0, len(cmds))
	for _, cmd := range cmds {
		list = append(list, models.BotCommand{Command: strings.TrimPrefix(cmd.Name, "/"), Description: cmd.Description})
	}
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	if _, err := c.b.DeleteMyCommands(rctx, &bot.DeleteMyCommandsParams{}); err != nil {
		return fmt.Errorf("telegram: deleteMyCommands: %w", c.redact(err))
	}
	if ownerChat == 0 {
		return nil
	}
	if _, err := c.b.SetMyCommands(rctx, &bot.SetMyCommandsParams{Commands: list, Scope: &models.BotCommandScopeChat{ChatID: ownerChat}}); err != nil {
		return fmt.Errorf("telegram: setMyCommands for the owner's chat: %w", c.redact(err))
	}
	return nil
}

// redact keeps the token out of errors (URLs in net/http errors contain it).
func (c *Client) redact(err error) error {
	if err == nil || c.token == "" || !strings.Contains(err.Error(), c.token) {
		return err
	}
	return &redactedError{msg: strings.ReplaceAll(err.Error(), c.token, "<token>"), err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
