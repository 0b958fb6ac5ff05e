package faketg

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The real go-telegram/bot client sends an inline keyboard, receives a
// press as a callback_query, answers it once (a second answer is refused,
// as Telegram refuses it) and edits the message, which drops its keyboard.
func TestRealClientInlineKeyboard(t *testing.T) {
	s := New()
	defer s.Close()
	owner := User{ID: 4242, FirstName: "Owner"}
	ctx := testCtx(t)

	got := make(chan *models.Update, 4)
	b, err := bot.New(token, bot.WithServerURL(s.URL()), bot.WithSkipGetMe(),
		bot.WithHTTPClient(2*time.Second, http.DefaultClient),
		bot.WithDefaultHandler(func(_ context.Context, _ *bot.Bot, u *models.Update) { got <- u }))
	require.NoError(t, err)
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go b.Start(pctx)

	kb := &models.InlineKeyboardMarkup{InlineKeyboard: [][]models.InlineKeyboardButton{{
		{Text: "Allow once", CallbackData: "ap:1:o"}, {Text: "Deny", CallbackData: "ap:1:d"},
	}}}
	msg, err := b.SendMessage(ctx, &bot.SendMessageParams{ChatID: owner.ID, Text: "<b>May I?</b>", ParseMode: models.ParseModeHTML, ReplyMarkup: kb})
	require.NoError(t, err)
	require.NotNil(t, msg.ReplyMarkup, "the sent message carries its keyboard")
	sent, ok := s.Message(owner.ID, int64(msg.ID))
	require.True(t, ok)
	assert.Equal(t, [][]Button{{{Text: "Allow once", CallbackData: "ap:1:o"}, {Text: "Deny", CallbackData: "ap:1:d"}}}, sent.Keyboard)

	qid, err := s.PressButton(owner, owner.ID, int64(msg.ID), "Deny")
	require.NoError(t, err)
	var u *models.Update
	select {
	case u = <-got:
	case <-ctx.Done():
		t.Fatal("callback query not delivered")
	}
	require.NotNil(t, u.CallbackQuery)
	cq := u.CallbackQuery
	assert.Equal(t, qid, cq.ID)
	assert.Equal(t, owner.ID, cq.From.ID)
	assert.Equal(t, "ap:1:d", cq.Data)
	require.NotNil(t, cq.Message.Message, "an accessible message")
	assert.Equal(t, msg.ID, cq.Message.Message.ID)
	assert.Equal(t, owner.ID, cq.Message.Message.Chat.ID)

	ok, err = b.AnswerCallbackQuery(ctx, &bot.AnswerCallbackQueryParams{CallbackQueryID: cq.ID, Text: "Denied."})
	require.NoError(t, err)
	assert.True(t, ok)
	_, err = b.AnswerCallbackQuery(ctx, &bot.AnswerCallbackQueryParams{CallbackQueryID: cq.ID, Text: "again"})
	require.ErrorIs(t, err, bot.ErrorBadRequest, "a query is answered once")
	_, err = b.AnswerCallbackQuery(ctx, &bot.AnswerCallbackQueryParams{CallbackQueryID: "forged"})
	require.ErrorIs(t, err, bot.ErrorBadRequest, "an unknown query id is refused")
	a, err := s.WaitAnswer(ctx, qid)
	require.NoError(t, err)
	assert.Equal(t, "Denied.", a.Text)

	edited, err := b.EditMessageText(ctx, &bot.EditMessageTextParams{ChatID: owner.ID, MessageID: msg.ID, Text: "<b>May I?</b>\nDenied by the owner.", ParseMode: models.ParseModeHTML})
	require.NoError(t, err)
	assert.Equal(t, "May I?\nDenied by the owner.", edited.Text)
	assert.Nil(t, edited.ReplyMarkup, "an edit without reply_markup drops the keyboard")
	now, _ := s.Message(owner.ID, int64(msg.ID))
	assert.Empty(t, now.Keyboard)
	_, err = s.PressButton(owner, owner.ID, int64(msg.ID), "Allow once")
	require.Error(t, err, "no button is left to press")
	require.Len(t, s.Edits(), 1)

	_, err = b.EditMessageText(ctx, &bot.EditMessageTextParams{ChatID: owner.ID, MessageID: msg.ID, Text: "<b>May I?</b>\nDenied by the owner.", ParseMode: models.ParseModeHTML})
	require.ErrorIs(t, err, bot.ErrorBadRequest, "an edit that changes nothing is refused")
	assert.Contains(t, err.Error(), "message is not modified")
	_, err = b.EditMessageText(ctx, &bot.EditMessageTextParams{ChatID: owner.ID, MessageID: 999, Text: "x"})
	require.ErrorIs(t, err, bot.ErrorBadRequest)
	assert.Contains(t, err.Error(), "message to edit not found")
}

// Buttons Telegram refuses: without a kind, with data over 64 bytes, with
// two kinds; a press on a message the bot never sent arrives inaccessible.
func TestKeyboardChecks(t *testing.T) {
	s := New()
	defer s.Close()
	for _, markup := range []string{
		`{"inline_keyboard":[[{"text":"plain"}]]}`,
		`{"inline_keyboard":[[{"text":"long","callback_data":"` + strings.Repeat("x", 65) + `"}]]}`,
		`{"inline_keyboard":[[{"text":"two","callback_data":"a","url":"https://example.org"}]]}`,
		`{"inline_keyboard":[[{"text":"","callback_data":"a"}]]}`,
		`{"keyboard":[[{"text":"reply"}]]}`,
	} {
		out := post(t, s, "sendMessage", map[string]any{"chat_id": 5, "text": "x", "reply_markup": json.RawMessage(markup)})
		assert.Equal(t, false, out["ok"], markup)
	}
	out := post(t, s, "sendMessage", map[string]any{"chat_id": 5, "text": "x",
		"reply_markup": json.RawMessage(`{"inline_keyboard":[[{"text":"ok","callback_data":"a","copy_text":{"text":""}}]]}`)})
	assert.Equal(t, true, out["ok"], "an empty copy_text is no kind")

	s.Press(User{ID: 9}, 5, 77, "ap:forged")
	res := post(t, s, "getUpdates", map[string]any{})["result"].([]any)
	cq := res[len(res)-1].(map[string]any)["callback_query"].(map[string]any)
	assert.Equal(t, "ap:forged", cq["data"])
	assert.Equal(t, float64(0), cq["message"].(map[string]any)["date"], "inaccessible")
}
