package faketg

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const token = "123456:TEST-token"

// newBot connects the real go-telegram/bot client to the fake.
func newBot(t *testing.T, s *Server) *bot.Bot {
	t.Helper()
	b, err := bot.New(token, bot.WithServerURL(s.URL()), bot.WithSkipGetMe(),
		bot.WithErrorsHandler(func(err error) { t.Logf("bot: %v", err) }))
	require.NoError(t, err)
	return b
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestRealClientGetMe(t *testing.T) {
	s := New(WithBot(42, "my_bot"))
	defer s.Close()
	b := newBot(t, s)
	me, err := b.GetMe(testCtx(t))
	require.NoError(t, err)
	assert.Equal(t, int64(42), me.ID)
	assert.Equal(t, "my_bot", me.Username)
	assert.True(t, me.IsBot)
	assert.Equal(t, []string{token}, s.Tokens())
	assert.Equal(t, 1, s.Calls("getMe"))
}

func TestRealClientSendMessageHTML(t *testing.T) {
	s := New()
	defer s.Close()
	b := newBot(t, s)
	ctx := testCtx(t)

	msg, err := b.SendMessage(ctx, &bot.SendMessageParams{
		ChatID: int64(-100123), MessageThreadID: 7, Text: "<b>hi</b> &amp; bye", ParseMode: models.ParseModeHTML,
	})
	require.NoError(t, err)
	assert.Equal(t, 1, msg.ID)
	assert.Equal(t, "hi & bye", msg.Text)
	assert.Equal(t, 7, msg.MessageThreadID)

	sent := s.SentTo(-100123)
	require.Len(t, sent, 1)
	assert.Equal(t, "<b>hi</b> &amp; bye", sent[0].Text)
	assert.Equal(t, "HTML", sent[0].ParseMode)
	assert.Equal(t, 7, sent[0].ThreadID)

	// Malformed HTML is rejected like Telegram does.
	_, err = b.SendMessage(ctx, &bot.SendMessageParams{ChatID: int64(5), Text: "<b>unclosed", ParseMode: models.ParseModeHTML})
	require.Error(t, err)
	assert.ErrorIs(t, err, bot.ErrorBadRequest)
	assert.Contains(t, err.Error(), "can't parse entities")
	assert.Empty(t, s.SentTo(5))

	// The same text as plain text goes through.
	_, err = b.SendMessage(ctx, &bot.SendMessageParams{ChatID: int64(5), Text: "<b>unclosed"})
	require.NoError(t, err)
	assert.Len(t, s.SentTo(5), 1)
}

func TestRealClientTooManyRequests(t *testing.T) {
	s := New()
	defer s.Close()
	b := newBot(t, s)
	s.FailNextSends(1, http.StatusTooManyRequests, 3)

	_, err := b.SendMessage(testCtx(t), &bot.SendMessageParams{ChatID: int64(1), Text: "x"})
	var tmr *bot.TooManyRequestsError
	require.ErrorAs(t, err, &tmr)
	assert.Equal(t, 3, tmr.RetryAfter)
	assert.Empty(t, s.Sent())

	_, err = b.SendMessage(testCtx(t), &bot.SendMessageParams{ChatID: int64(1), Text: "x"})
	require.NoError(t, err, "only the next send fails")
}

func TestRealClientServerError(t *testing.T) {
	s := New()
	defer s.Close()
	b := newBot(t, s)
	s.FailNextSends(2, http.StatusInternalServerError, 0)
	for range 2 {
		_, err := b.SendMessage(testCtx(t), &bot.SendMessageParams{ChatID: int64(1), Text: "x"})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "500")
	}
	_, err := b.SendMessage(testCtx(t), &bot.SendMessageParams{ChatID: int64(1), Text: "x"})
	require.NoError(t, err)
}

func TestRealClientDroppedConnection(t *testing.T) {
	s := New()
	defer s.Close()
	b := newBot(t, s)
	s.DropNextConnections(1)
	_, err := b.GetMe(testCtx(t))
	require.Error(t, err)
	_, err = b.GetMe(testCtx(t))
	require.NoError(t, err)
}

func TestRealClientGetUpdates(t *testing.T) {
	s := New()
	defer s.Close()
	alice := User{ID: 77, FirstName: "Alice", Username: "alice"}
	id := s.PushMessage(-100500, "supergroup", "Team", alice, "hello @andy_test_bot", InThread(3))

	got := make(chan *models.Update, 1)
	b, err := bot.New(token, bot.WithServerURL(s.URL()), bot.WithSkipGetMe(),
		bot.WithHTTPClient(2*time.Second, http.DefaultClient),
		bot.WithDefaultHandler(func(_ context.Context, _ *bot.Bot, u *models.Update) { got <- u }))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	go b.Start(ctx)

	select {
	case u := <-got:
		assert.Equal(t, id, u.ID)
		require.NotNil(t, u.Message)
		assert.Equal(t, "hello @andy_test_bot", u.Message.Text)
		assert.Equal(t, int64(-100500), u.Message.Chat.ID)
		assert.Equal(t, "Team", u.Message.Chat.Title)
		assert.Equal(t, 3, u.Message.MessageThreadID)
		assert.True(t, u.Message.IsTopicMessage)
		require.Len(t, u.Message.Entities, 1)
		assert.Equal(t, models.MessageEntityTypeMention, u.Message.Entities[0].Type)
		assert.Equal(t, 6, u.Message.Entities[0].Offset)
		assert.Equal(t, 14, u.Message.Entities[0].Length)
		assert.Equal(t, int64(77), u.Message.From.ID)
	case <-ctx.Done():
		t.Fatal("update not delivered")
	}
	// The library asks again with offset id+1, which confirms the update.
	require.NoError(t, s.WaitConfirmed(ctx, id+1))
	assert.Equal(t, 0, s.Pending())
}

// post calls a Bot API method with a JSON body, the way other clients (curl) do.
func post(t *testing.T, s *Server, method string, body any) map[string]any {
	t.Helper()
	data, err := json.Marshal(body)
	require.NoError(t, err)
	resp, err := http.Post(s.URL()+"/bot"+token+"/"+method, "application/json", bytes.NewReader(data))
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	if ok, _ := out["ok"].(bool); !ok {
		code, _ := out["error_code"].(float64)
		assert.Equal(t, int(code), resp.StatusCode, "HTTP status equals error_code")
	}
	return out
}

func TestLongPollWaitsAndOffsets(t *testing.T) {
	s := New()
	defer s.Close()
	u := User{ID: 1, FirstName: "U"}

	// Nothing queued: a long poll returns an empty list when its timeout expires.
	out := post(t, s, "getUpdates", map[string]any{"timeout": 1})
	assert.Equal(t, true, out["ok"])
	assert.Empty(t, out["result"])

	// A message pushed while a poll waits is delivered to that poll.
	done := make(chan map[string]any)
	go func() { done <- post(t, s, "getUpdates", map[string]any{"timeout": 10}) }()
	time.Sleep(100 * time.Millisecond) // let the poll start waiting; correctness does not depend on it
	id1 := s.PushMessage(1, "private", "", u, "one")
	out = <-done
	require.Len(t, out["result"], 1)

	id2 := s.PushMessage(1, "private", "", u, "two")
	// Without a higher offset both stay pending.
	out = post(t, s, "getUpdates", map[string]any{"offset": id1})
	assert.Len(t, out["result"], 2)
	// Offset id2 confirms id1.
	out = post(t, s, "getUpdates", map[string]any{"offset": id2})
	require.Len(t, out["result"], 1)
	assert.Equal(t, float64(id2), out["result"].([]any)[0].(map[string]any)["update_id"])
	assert.Equal(t, id2, s.Confirmed())
	// Form-encoded bodies work too.
	resp, err := http.PostForm(s.URL()+"/bot"+token+"/getUpdates", url.Values{"offset": {"999"}})
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, int64(999), s.Confirmed())
	assert.Equal(t, 0, s.Pending())
}

func TestCloseEndsLongPoll(t *testing.T) {
	s := New()
	answered := make(chan map[string]any, 1)
	go func() {
		// An hour: within the test only Close can end this poll.
		resp, err := http.Post(s.URL()+"/bot"+token+"/getUpdates", "application/json", strings.NewReader(`{"timeout":3600}`))
		if err != nil {
			answered <- map[string]any{"error": err.Error()}
			return
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			out = map[string]any{"error": err.Error()}
		}
		answered <- out
	}()
	// The poll is in the handler once it is counted.
	for s.Calls("getUpdates") == 0 {
		time.Sleep(time.Millisecond)
	}
	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	select {
	case out := <-answered:
		assert.Equal(t, map[string]any{"ok": true, "result": []any{}}, out, "an empty answer, as at the end of a poll")
	case <-time.After(time.Minute): // ends a hung test only: the poll would last an hour
		t.Fatal("Close did not end the long poll")
	}
	<-closed
}

func TestErrorsLookLikeTelegram(t *testing.T) {
	s := New()
	defer s.Close()
	tests := []struct {
		name, method string
		body         map[string]any
		code         int
		desc         string
	}{
		{"unknown method", "sendTeleportation", map[string]any{}, 404, "Not Found"},
		{"empty text", "sendMessage", map[string]any{"chat_id": 1, "text": ""}, 400, "Bad Request: message text is empty"},
		{"too long", "sendMessage", map[string]any{"chat_id": 1, "text": strings.Repeat("a", 4097)}, 400, "Bad Request: message is too long"},
		{"bad chat", "sendMessage", map[string]any{"chat_id": "@nobody", "text": "x"}, 400, "Bad Request: chat not found"},
		{"unsupported tag", "sendMessage", map[string]any{"chat_id": 1, "text": "<x>y</x>", "parse_mode": "HTML"}, 400, `Bad Request: can't parse entities: Unsupported start tag "x" at byte offset 0`},
		{"bad nesting", "sendMessage", map[string]any{"chat_id": 1, "text": "<b><i>y</b></i>", "parse_mode": "HTML"}, 400, `Bad Request: can't parse entities: Unmatched end tag at byte offset 7, expected "</i>", found "</b>"`},
		{"bad action", "sendChatAction", map[string]any{"chat_id": 1, "action": "dancing"}, 400, "Bad Request: wrong parameter action in request"},
		{"bad command", "setMyCommands", map[string]any{"commands": []map[string]string{{"command": "Bad-Name", "description": "x"}}}, 400, "Bad Request: BOT_COMMAND_INVALID"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := post(t, s, tt.method, tt.body)
			assert.Equal(t, false, out["ok"])
			assert.Equal(t, float64(tt.code), out["error_code"])
			assert.Equal(t, tt.desc, out["description"])
		})
	}
	assert.Empty(t, s.Sent())
}

func TestHTMLLengthCountsVisibleText(t *testing.T) {
	s := New()
	defer s.Close()
	// 4096 visible characters wrapped in tags: long source, legal message.
	text := "<b>" + strings.Repeat("&amp;", 4096) + "</b>"
	out := post(t, s, "sendMessage", map[string]any{"chat_id": 1, "text": text, "parse_mode": "HTML"})
	assert.Equal(t, true, out["ok"])
}

func TestActionsAndCommands(t *testing.T) {
	s := New()
	defer s.Close()
	b := newBot(t, s)
	ctx := testCtx(t)
	ok, err := b.SendChatAction(ctx, &bot.SendChatActionParams{ChatID: int64(-5), MessageThreadID: 9, Action: models.ChatActionTyping})
	require.NoError(t, err)
	assert.True(t, ok)
	acts := s.ChatActions(-5)
	require.Len(t, acts, 1)
	assert.False(t, acts[0].Time.IsZero())
	acts[0].Time = time.Time{}
	assert.Equal(t, []ChatAction{{ChatID: -5, ThreadID: 9, Action: "typing"}}, acts)

	_, err = b.SetMyCommands(ctx, &bot.SetMyCommandsParams{Commands: []models.BotCommand{{Command: "help", Description: "Show help"}}})
	require.NoError(t, err)
	assert.Equal(t, []Command{{Command: "help", Description: "Show help"}}, s.Commands())

	_, err = b.DeleteWebhook(ctx, &bot.DeleteWebhookParams{})
	require.NoError(t, err)
}

func TestHTTPControl(t *testing.T) {
	s := New()
	defer s.Close()
	ctx := testCtx(t)

	body := `{"chat_id":-100,"chat_type":"group","title":"G","from":{"id":5,"first_name":"Bo","username":"bo"},"text":"hi","reply_to_bot":true,"thread_id":0}`
	resp, err := http.Post(s.URL()+"/control/message", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	var pushed struct {
		UpdateID int64 `json:"update_id"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&pushed))
	resp.Body.Close()
	assert.Equal(t, int64(1), pushed.UpdateID)

	out := post(t, s, "getUpdates", map[string]any{})
	msg := out["result"].([]any)[0].(map[string]any)["message"].(map[string]any)
	assert.Equal(t, "hi", msg["text"])
	reply := msg["reply_to_message"].(map[string]any)
	assert.Equal(t, float64(DefaultBotID), reply["from"].(map[string]any)["id"])

	resp, err = http.Post(s.URL()+"/control/fail", "application/json", strings.NewReader(`{"n":1,"code":429,"retry_after":2}`))
	require.NoError(t, err)
	resp.Body.Close()
	out = post(t, s, "sendMessage", map[string]any{"chat_id": -100, "text": "a"})
	assert.Equal(t, float64(2), out["parameters"].(map[string]any)["retry_after"])
	post(t, s, "sendMessage", map[string]any{"chat_id": -100, "text": "b"})

	_, err = s.WaitSent(ctx, -100, 1)
	require.NoError(t, err)
	resp, err = http.Get(s.URL() + "/control/sent?chat_id=-100")
	require.NoError(t, err)
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var sent []SentMessage
	require.NoError(t, json.Unmarshal(data, &sent))
	require.Len(t, sent, 1)
	assert.Equal(t, "b", sent[0].Text)
}

func TestStartStandalone(t *testing.T) {
	s, err := Start("127.0.0.1:0")
	require.NoError(t, err)
	defer s.Close()
	b := newBot(t, s)
	me, err := b.GetMe(testCtx(t))
	require.NoError(t, err)
	assert.Equal(t, DefaultBotUsername, me.Username)
}

func TestWaitSentTimesOut(t *testing.T) {
	s := New()
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := s.WaitSent(ctx, 1, 1)
	require.Error(t, err)
	assert.True(t, errors.Is(err, context.DeadlineExceeded))
}

func TestParseHTML(t *testing.T) {
	tests := []struct {
		in, visible, err string
	}{
		{"plain & simple > x", "plain & simple > x", ""},
		{"<b>b</b><strong>s</strong><i>i</i><em>e</em><u>u</u><s>s</s><del>d</del>", "bsieusd", ""},
		{`<a href="https://x.y/?a=1&amp;b=2">l</a>`, "l", ""},
		{`<pre><code class="language-go">x &lt; y</code></pre>`, "x < y", ""},
		{`<span class="tg-spoiler">s</span><tg-spoiler>t</tg-spoiler>`, "st", ""},
		{"<blockquote expandable>q</blockquote>", "q", ""},
		{"&#65;&#x42;&lt;&gt;&quot;&amp;", `AB<>"&`, ""},
		{"a < b", "", "Unclosed start tag at byte offset 2"},
		{"<b>x", "", `Can't find end tag corresponding to start tag "b"`},
		{"x</b>", "", "Unexpected end tag at byte offset 1"},
		{"<a>x</a>", "", `Can't find attribute "href" in tag "a" at byte offset 0`},
		{`<b class="x">y</b>`, "", `Unsupported attribute "class" in tag "b" at byte offset 0`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			v, err := parseHTML(tt.in)
			if tt.err != "" {
				require.EqualError(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.visible, v)
		})
	}
}
