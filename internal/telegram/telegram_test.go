package telegram

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/faketg"
	"github.com/clawpen/clawpen/internal/markup"
)

const testToken = "4242:SECRET-token-value"

var (
	alice = faketg.User{ID: 501, FirstName: "Alice", LastName: "Liddell", Username: "alice"}
	bob   = faketg.User{ID: 502, Username: "bob_b"}
)

// syncBuffer collects log output from concurrent goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type env struct {
	srv  *faketg.Server
	c    *Client
	logs *syncBuffer
}

// newEnv starts a fake Bot API server and a Client on it. Pacing is off unless given.
func newEnv(t *testing.T, pacing ...Pacing) *env {
	t.Helper()
	srv := faketg.New()
	t.Cleanup(srv.Close)
	logs := &syncBuffer{}
	p := Pacing{PerChatInterval: -1, GroupPerMinute: -1, GlobalPerSecond: -1}
	if len(pacing) > 0 {
		p = pacing[0]
	}
	c, err := New(testCtx(t), Config{
		Token: testToken, APIURL: srv.URL(), PollTimeout: time.Second, Pacing: p,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	require.NoError(t, err)
	return &env{srv: srv, c: c, logs: logs}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestNew(t *testing.T) {
	e := newEnv(t)
	assert.Equal(t, faketg.DefaultBotUsername, e.c.Username())
	assert.Equal(t, int64(faketg.DefaultBotID), e.c.BotID())
	assert.Equal(t, []string{testToken}, e.srv.Tokens())
	assert.Equal(t, 1, e.srv.Calls("getMe"))
}

func TestNewErrors(t *testing.T) {
	srv := faketg.New(faketg.WithToken("other:token"))
	defer srv.Close()
	_, err := New(testCtx(t), Config{Token: testToken, APIURL: srv.URL()})
	require.ErrorIs(t, err, ErrTokenRefused)
	assert.Contains(t, err.Error(), "getMe")
	assert.NotContains(t, err.Error(), testToken)

	_, err = New(testCtx(t), Config{Token: " "})
	require.Error(t, err)
	_, err = New(testCtx(t), Config{Token: testToken})
	require.ErrorContains(t, err, "not an http(s) URL", "no default server: config names it")

	// Unreachable server: the error must not leak the token.
	dead := faketg.New()
	url := dead.URL()
	dead.Close()
	_, err = New(testCtx(t), Config{Token: testToken, APIURL: url})
	require.Error(t, err)
	assert.NotErrorIs(t, err, ErrTokenRefused, "out of reach is not refused")
	assert.ErrorIs(t, err, ErrUnreachable, "serve waits for it")
	assert.NotContains(t, err.Error(), testToken)
}

// poller runs Poll in the background and records what it sees.
type poller struct {
	mu      sync.Mutex
	updates []Update
	offsets []int64
	failOn  map[int64]int // update id -> how many times handle fails first
	cancel  context.CancelFunc
	done    chan error
	seen    chan struct{}
}

func startPoll(t *testing.T, c *Client, offset int64, failOn map[int64]int) *poller {
	t.Helper()
	ctx, cancel := context.WithCancel(testCtx(t))
	p := &poller{failOn: failOn, cancel: cancel, done: make(chan error, 1), seen: make(chan struct{}, 100)}
	go func() {
		p.done <- c.Poll(ctx, offset, func(_ context.Context, u Update) error {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.updates = append(p.updates, u)
			p.seen <- struct{}{}
			if p.failOn[u.UpdateID] > 0 {
				p.failOn[u.UpdateID]--
				return errors.New("store unavailable")
			}
			return nil
		}, func(_ context.Context, next int64) error {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.offsets = append(p.offsets, next)
			return nil
		})
	}()
	t.Cleanup(func() { p.stop(t) })
	return p
}

// waitHandled waits until handle ran n times in total.
func (p *poller) waitHandled(t *testing.T, n int) {
	t.Helper()
	for {
		p.mu.Lock()
		got := len(p.updates)
		p.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-p.seen:
		case <-time.After(20 * time.Second):
			t.Fatalf("handled %d of %d updates", got, n)
		}
	}
}

func (p *poller) stop(t *testing.T) {
	p.cancel()
	select {
	case err := <-p.done:
		if err != nil {
			assert.ErrorIs(t, err, context.Canceled)
		}
		p.done <- err // keep it for a second stop
	case <-time.After(20 * time.Second):
		t.Fatal("Poll did not stop")
	}
}

func (p *poller) snapshot() ([]Update, []int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Update(nil), p.updates...), append([]int64(nil), p.offsets...)
}

func ids(us []Update) []int64 {
	var out []int64
	for _, u := range us {
		out = append(out, u.UpdateID)
	}
	return out
}

func TestPollDeliversInOrderAndSavesOffsets(t *testing.T) {
	e := newEnv(t)
	id1 := e.srv.PushMessage(alice.ID, "private", "", alice, "one")
	id2 := e.srv.PushMessage(alice.ID, "private", "", alice, "two")
	p := startPoll(t, e.c, 0, nil)
	p.waitHandled(t, 2)
	id3 := e.srv.PushMessage(alice.ID, "private", "", alice, "three") // arrives during a long poll
	p.waitHandled(t, 3)
	p.stop(t)

	updates, offsets := p.snapshot()
	assert.Equal(t, []int64{id1, id2, id3}, ids(updates))
	assert.Equal(t, []string{"one", "two", "three"}, []string{updates[0].Message.Text, updates[1].Message.Text, updates[2].Message.Text})
	assert.Equal(t, []int64{id1 + 1, id2 + 1, id3 + 1}, offsets)
	assert.GreaterOrEqual(t, e.srv.Confirmed(), id2+1, "the server was told about handled updates")
	assert.NotContains(t, e.logs.String(), "three", "message text is never logged")
}

func TestPollRetriesFailedHandleWithoutLosingOrder(t *testing.T) {
	e := newEnv(t)
	id1 := e.srv.PushMessage(alice.ID, "private", "", alice, "one")
	id2 := e.srv.PushMessage(alice.ID, "private", "", alice, "two")
	id3 := e.srv.PushMessage(alice.ID, "private", "", alice, "three")
	p := startPoll(t, e.c, 0, map[int64]int{id2: 1})
	p.waitHandled(t, 4)
	p.stop(t)

	updates, offsets := p.snapshot()
	assert.Equal(t, []int64{id1, id2, id2, id3}, ids(updates), "the failed update is retried before the next one")
	assert.Equal(t, []int64{id1 + 1, id2 + 1, id3 + 1}, offsets, "no offset saved for the failed attempt")
	assert.Contains(t, e.logs.String(), "update handler failed")
}

func TestPollResumesFromSavedOffset(t *testing.T) {
	e := newEnv(t)
	e.srv.PushMessage(alice.ID, "private", "", alice, "one")
	id2 := e.srv.PushMessage(alice.ID, "private", "", alice, "two")
	p := startPoll(t, e.c, 0, nil)
	p.waitHandled(t, 2)
	p.stop(t)
	_, offsets := p.snapshot()
	saved := offsets[len(offsets)-1]
	require.Equal(t, id2+1, saved)

	// A restart with the saved offset gets only what came after.
	id3 := e.srv.PushMessage(alice.ID, "private", "", alice, "three")
	p2 := startPoll(t, e.c, saved, nil)
	p2.waitHandled(t, 1)
	p2.stop(t)
	updates, _ := p2.snapshot()
	assert.Equal(t, []int64{id3}, ids(updates))
}

func TestPollSurvivesNetworkErrors(t *testing.T) {
	e := newEnv(t)
	e.srv.DropNextConnections(3) // deleteWebhook and two getUpdates
	id := e.srv.PushMessage(alice.ID, "private", "", alice, "hello")
	p := startPoll(t, e.c, 0, nil)
	p.waitHandled(t, 1)
	p.stop(t)
	updates, _ := p.snapshot()
	assert.Equal(t, []int64{id}, ids(updates))
	assert.Contains(t, e.logs.String(), "getUpdates failed")
}

func TestPollStopsOnBadToken(t *testing.T) {
	srv := faketg.New()
	defer srv.Close()
	c, err := New(testCtx(t), Config{Token: testToken, APIURL: srv.URL(), PollTimeout: time.Second})
	require.NoError(t, err)
	bad := *c
	bad.token = "9:revoked"
	// A fake that requires another token answers 401 to getUpdates.
	srv2 := faketg.New(faketg.WithToken("nobody"))
	defer srv2.Close()
	bad.apiURL = srv2.URL()
	err = bad.Poll(testCtx(t), 0, func(context.Context, Update) error { return nil }, func(context.Context, int64) error { return nil })
	require.Error(t, err)
	assert.Contains(t, err.Error(), "401")
	assert.NotContains(t, err.Error(), "9:revoked")
}

func TestDecodeIncoming(t *testing.T) {
	e := newEnv(t)
	bot := faketg.User{ID: faketg.DefaultBotID, IsBot: true, FirstName: "Andy", Username: faketg.DefaultBotUsername}
	other := faketg.User{ID: 999, IsBot: true, FirstName: "Other", Username: "other_bot"}
	tests := []struct {
		name  string
		push  func() int64
		check func(t *testing.T, m *domain.Inbound)
	}{
		{"private text", func() int64 {
			return e.srv.PushMessage(alice.ID, "private", "", alice, "hi there")
		}, func(t *testing.T, m *domain.Inbound) {
			assert.Equal(t, alice.ID, m.ChatID)
			assert.Equal(t, "private", m.ChatType)
			assert.Equal(t, "Alice Liddell", m.ChatTitle)
			assert.Equal(t, alice.ID, m.SenderID)
			assert.Equal(t, "Alice Liddell", m.SenderName)
			assert.Equal(t, "hi there", m.Text)
			assert.False(t, m.SenderIsBot || m.ReplyToBot || m.MentionsBot)
			assert.NotZero(t, m.MessageID)
			assert.WithinDuration(t, time.Now(), m.Time, time.Hour)
		}},
		{"name falls back to username", func() int64 {
			return e.srv.PushMessage(-100, "group", "Team", bob, "yo")
		}, func(t *testing.T, m *domain.Inbound) {
			assert.Equal(t, "@bob_b", m.SenderName)
			assert.Equal(t, "Team", m.ChatTitle)
			assert.Equal(t, "group", m.ChatType)
		}},
		{"mention of the bot, any case, after emoji", func() int64 {
			return e.srv.PushMessage(-100, "group", "Team", alice, "😀 hey @Andy_Test_Bot what's up")
		}, func(t *testing.T, m *domain.Inbound) {
			assert.True(t, m.MentionsBot)
			assert.False(t, m.ReplyToBot)
		}},
		{"mention of another bot", func() int64 {
			return e.srv.PushMessage(-100, "group", "Team", alice, "hey @andy_test_bot2 and @other_bot")
		}, func(t *testing.T, m *domain.Inbound) {
			assert.False(t, m.MentionsBot)
		}},
		{"bot name as plain text without entity", func() int64 {
			return e.srv.PushMessage(-100, "group", "Team", alice, "@andy_test_bot", faketg.WithEntities())
		}, func(t *testing.T, m *domain.Inbound) {
			assert.False(t, m.MentionsBot, "only entities count, as Telegram marks them")
		}},
		{"text mention of the bot", func() int64 {
			txt := "ask Andy please"
			return e.srv.PushMessage(-100, "group", "Team", alice, txt, faketg.WithEntities(faketg.MentionOf(txt, 4, 8, bot)))
		}, func(t *testing.T, m *domain.Inbound) {
			assert.True(t, m.MentionsBot)
		}},
		{"text mention of someone else", func() int64 {
			txt := "ask Other please"
			return e.srv.PushMessage(-100, "group", "Team", alice, txt, faketg.WithEntities(faketg.MentionOf(txt, 4, 9, other)))
		}, func(t *testing.T, m *domain.Inbound) {
			assert.False(t, m.MentionsBot)
		}},
		{"reply to the bot", func() int64 {
			return e.srv.PushMessage(-100, "group", "Team", alice, "and then?", faketg.ReplyToBot())
		}, func(t *testing.T, m *domain.Inbound) {
			assert.True(t, m.ReplyToBot)
		}},
		{"reply to a person", func() int64 {
			return e.srv.PushMessage(-100, "group", "Team", alice, "agreed", faketg.ReplyTo(1))
		}, func(t *testing.T, m *domain.Inbound) {
			assert.False(t, m.ReplyToBot)
		}},
		{"forum topic", func() int64 {
			return e.srv.PushMessage(-100777, "supergroup", "Forum", alice, "in a topic", faketg.InThread(12))
		}, func(t *testing.T, m *domain.Inbound) {
			assert.Equal(t, 12, m.ThreadID, "a topic's messages are answered in the topic")
			assert.False(t, m.ReplyToBot, "the topic-creation pseudo reply is not a reply")
		}},
		{"topic created by the bot", func() int64 {
			return e.srv.PushMessage(-100777, "supergroup", "Forum", alice, "hello", faketg.InThread(13), faketg.TopicCreatedBy(bot))
		}, func(t *testing.T, m *domain.Inbound) {
			assert.Equal(t, 13, m.ThreadID)
			assert.False(t, m.ReplyToBot, "the topic-creation pseudo reply is not a reply, even when the bot made the topic")
		}},
		{"reply to the bot inside a topic", func() int64 {
			return e.srv.PushMessage(-100777, "supergroup", "Forum", alice, "more", faketg.InThread(12), faketg.ReplyToBot())
		}, func(t *testing.T, m *domain.Inbound) {
			assert.Equal(t, 12, m.ThreadID)
			assert.True(t, m.ReplyToBot)
		}},
		{"caption", func() int64 {
			return e.srv.PushMessage(-100, "group", "Team", alice, "look @andy_test_bot", faketg.AsCaption())
		}, func(t *testing.T, m *domain.Inbound) {
			assert.Equal(t, "look @andy_test_bot", m.Text)
			assert.True(t, m.MentionsBot)
			assert.Empty(t, m.Media, "a caption is text")
		}},
		{"captionless photo", func() int64 {
			return e.srv.PushMessage(-100, "group", "Team", alice, "", faketg.AsCaption(), faketg.ReplyToBot())
		}, func(t *testing.T, m *domain.Inbound) {
			assert.Empty(t, m.Text)
			assert.Equal(t, "photo", m.Media)
			assert.True(t, m.ReplyToBot)
		}},
		{"sticker", func() int64 {
			return e.srv.PushMessage(alice.ID, "private", "", alice, "", faketg.Sticker())
		}, func(t *testing.T, m *domain.Inbound) {
			assert.Empty(t, m.Text)
			assert.Equal(t, "sticker", m.Media)
		}},
		{"migrate to", func() int64 {
			return e.srv.PushMessage(-100, "group", "Team", alice, "", faketg.MigrateTo(-1001234))
		}, func(t *testing.T, m *domain.Inbound) {
			assert.Equal(t, int64(-1001234), m.MigrateToChatID)
			assert.Empty(t, m.Text)
			assert.Empty(t, m.Media, "a service message holds nothing to read")
		}},
		{"migrate from", func() int64 {
			return e.srv.PushMessage(-1001234, "supergroup", "Team", alice, "", faketg.MigrateFrom(-100))
		}, func(t *testing.T, m *domain.Inbound) {
			assert.Equal(t, int64(-100), m.MigrateFromChatID)
			assert.Equal(t, "supergroup", m.ChatType)
		}},
		{"sender is a bot", func() int64 {
			return e.srv.PushMessage(-100, "group", "Team", other, "beep")
		}, func(t *testing.T, m *domain.Inbound) {
			assert.True(t, m.SenderIsBot)
		}},
	}
	var pushed []int64
	for _, tt := range tests {
		pushed = append(pushed, tt.push())
	}
	p := startPoll(t, e.c, 0, nil)
	p.waitHandled(t, len(tests))
	p.stop(t)
	updates, _ := p.snapshot()
	require.Equal(t, pushed, ids(updates))
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.NotNil(t, updates[i].Message)
			tt.check(t, updates[i].Message)
		})
	}
}

func TestNonMessageUpdatesAreAcknowledged(t *testing.T) {
	e := newEnv(t)
	// Not asked for (allowed_updates): Telegram keeps it from the bot.
	_, err := e.srv.PushUpdate([]byte(`{"edited_message":{"message_id":1,"date":1,"chat":{"id":5,"type":"private"},"text":"edit"}}`))
	require.NoError(t, err)
	broken, err := e.srv.PushUpdate([]byte(`{"message":{"message_id":"not a number","chat":{"id":5}}}`))
	require.NoError(t, err)
	next := e.srv.PushMessage(5, "private", "", alice, "real")
	p := startPoll(t, e.c, 0, nil)
	p.waitHandled(t, 2)
	p.stop(t)
	updates, offsets := p.snapshot()
	require.Equal(t, []int64{broken, next}, ids(updates))
	assert.Nil(t, updates[0].Message)
	assert.Equal(t, "real", updates[1].Message.Text)
	assert.Equal(t, next+1, offsets[len(offsets)-1])
}

// Buttons go out as an inline keyboard under HTML; a press comes back
// through Poll (the bot asks for callback queries) with who pressed what on
// which message; the answer and the edit reach Telegram.
func TestButtonsPressAnswerEdit(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	id, err := e.c.SendButtons(ctx, alice.ID, "<b>May I?</b> &lt;x&gt;", []domain.Button{{Text: "Allow once", Data: "ap:1:o"}, {Text: "Deny", Data: "ap:1:d"}})
	require.NoError(t, err)
	m, ok := e.srv.Message(alice.ID, id)
	require.True(t, ok)
	assert.Equal(t, "May I? <x>", m.Visible)
	assert.Equal(t, [][]faketg.Button{{{Text: "Allow once", CallbackData: "ap:1:o"}, {Text: "Deny", CallbackData: "ap:1:d"}}}, m.Keyboard)

	qid, err := e.srv.PressButton(bob, alice.ID, id, "Deny")
	require.NoError(t, err)
	p := startPoll(t, e.c, 0, nil)
	p.waitHandled(t, 1)
	p.stop(t)
	updates, _ := p.snapshot()
	require.NotNil(t, updates[0].Press)
	assert.Nil(t, updates[0].Message)
	assert.Equal(t, domain.Press{ID: qid, From: bob.ID, ChatID: alice.ID, MessageID: id, Data: "ap:1:d"}, *updates[0].Press)

	require.NoError(t, e.c.AnswerPress(ctx, qid, "Only the owner answers this."))
	a, err := e.srv.WaitAnswer(ctx, qid)
	require.NoError(t, err)
	assert.Equal(t, "Only the owner answers this.", a.Text)
	require.Error(t, e.c.AnswerPress(ctx, qid, "again"), "Telegram takes one answer")

	require.NoError(t, e.c.EditText(ctx, alice.ID, id, "<b>May I?</b> Denied."))
	m, _ = e.srv.Message(alice.ID, id)
	assert.Equal(t, "May I? Denied.", m.Visible)
	assert.Empty(t, m.Keyboard, "the buttons are gone")
	var refused *RefusedError
	require.ErrorAs(t, e.c.EditText(ctx, alice.ID, 999, "x"), &refused, "a message that is not there: a retry cannot help")
}

func TestSendOneMessageMeasuredAsTelegramDoes(t *testing.T) {
	e := newEnv(t)
	// 4,000 visible characters whose HTML is five times longer: one message.
	md := strings.Repeat("&<", 2000)
	require.Len(t, markup.Messages(md, markup.MaxMessageLen), 1)
	require.NoError(t, e.c.Send(testCtx(t), 77, 0, md))
	sent := e.srv.SentTo(77)
	require.Len(t, sent, 1)
	assert.Equal(t, "HTML", sent[0].ParseMode)
	assert.Equal(t, md, sent[0].Visible)
}

func TestSendFallsBackToPlainText(t *testing.T) {
	e := newEnv(t)
	e.srv.FailNextSends(1, http.StatusBadRequest, 0)
	require.NoError(t, e.c.Send(testCtx(t), 9, 0, "**bold**"))
	sent := e.srv.SentTo(9)
	require.Len(t, sent, 1)
	assert.Equal(t, "**bold**", sent[0].Text)
	assert.Empty(t, sent[0].ParseMode)
	assert.Contains(t, e.logs.String(), "HTML rejected")
}

func TestSendTriesOnceAndSaysWhy(t *testing.T) {
	e := newEnv(t)
	e.srv.FailNextSends(1, http.StatusTooManyRequests, 3)
	err := e.c.Send(testCtx(t), 11, 0, "hello *world*")
	var throttled *ThrottledError
	require.ErrorAs(t, err, &throttled)
	assert.Equal(t, 3*time.Second, throttled.RetryIn())
	assert.Empty(t, e.srv.SentTo(11), "nothing is sent after a 429")

	e.srv.FailNextSends(1, http.StatusInternalServerError, 0)
	err = e.c.Send(testCtx(t), 12, 0, "hi")
	require.Error(t, err)
	var refused *RefusedError
	assert.False(t, errors.As(err, &refused), "a server error is worth retrying")
	assert.Empty(t, e.srv.SentTo(12), "the caller retries, not Send")

	e.srv.DropNextConnections(1)
	require.Error(t, e.c.Send(testCtx(t), 12, 0, "again"))
	require.NoError(t, e.c.Send(testCtx(t), 12, 0, "again"))
	assert.Len(t, e.srv.SentTo(12), 1)

	// A forbidden chat is refused for good.
	e.srv.FailNextSends(1, http.StatusForbidden, 0)
	err = e.c.Send(testCtx(t), 15, 0, "x")
	require.ErrorAs(t, err, &refused)
	assert.True(t, refused.Permanent())
	assert.Empty(t, e.srv.SentTo(15))
}

func TestSendCarriesThreadAndTyping(t *testing.T) {
	e := newEnv(t)
	err := e.c.Send(testCtx(t), -100777, 12, "in topic")
	require.NoError(t, err)
	sent := e.srv.SentTo(-100777)
	require.Len(t, sent, 1)
	assert.Equal(t, 12, sent[0].ThreadID)

	require.NoError(t, e.c.Typing(testCtx(t), -100777, 12))
	acts := e.srv.ChatActions(-100777)
	for i := range acts {
		acts[i].Time = time.Time{}
	}
	assert.Equal(t, []faketg.ChatAction{{ChatID: -100777, ThreadID: 12, Action: "typing"}}, acts)
}

func TestSendMigratedChat(t *testing.T) {
	e := newEnv(t)
	e.srv.MigrateChat(-100, -1009999)
	err := e.c.Send(testCtx(t), -100, 0, "hello")
	var mig *MigratedError
	require.ErrorAs(t, err, &mig)
	assert.Equal(t, int64(-100), mig.ChatID)
	assert.Equal(t, int64(-1009999), mig.NewChatID)
}

func TestSendNothingIsRefused(t *testing.T) {
	e := newEnv(t)
	err := e.c.Send(testCtx(t), 16, 0, "  \n\n ")
	var refused *RefusedError
	require.ErrorAs(t, err, &refused, "Telegram refuses an empty message")
	assert.Empty(t, e.srv.SentTo(16))
}

func TestNoTextInLogs(t *testing.T) {
	e := newEnv(t)
	e.srv.FailNextSends(1, http.StatusBadRequest, 0)
	require.NoError(t, e.c.Send(testCtx(t), 17, 0, "**secret-words**"))
	assert.NotEmpty(t, e.logs.String())
	assert.NotContains(t, e.logs.String(), "secret-words")
	assert.NotContains(t, e.logs.String(), testToken)
}
