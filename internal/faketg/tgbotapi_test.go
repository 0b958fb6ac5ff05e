package faketg

import (
	"testing"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The fake also speaks to go-telegram-bot-api/v5, the client the original
// design named: getMe, sendMessage (HTML), getUpdates and a 429.
func TestGoTelegramBotAPIClientAcceptsFake(t *testing.T) {
	srv := New()
	defer srv.Close()
	api, err := tgbotapi.NewBotAPIWithAPIEndpoint("123:abc", srv.URL()+"/bot%s/%s")
	require.NoError(t, err)
	assert.Equal(t, "andy_test_bot", api.Self.UserName)

	msg := tgbotapi.NewMessage(42, "<b>hi</b> there")
	msg.ParseMode = tgbotapi.ModeHTML
	sent, err := api.Send(msg)
	require.NoError(t, err)
	assert.Equal(t, int64(42), sent.Chat.ID)
	require.Len(t, srv.SentTo(42), 1)
	assert.Equal(t, "hi there", srv.SentTo(42)[0].Visible)

	srv.PushMessage(-100, "supergroup", "Family", User{ID: 7, FirstName: "Eve"}, "@Andy hello")
	u := tgbotapi.NewUpdate(0)
	u.Timeout = 1
	updates, err := api.GetUpdates(u)
	require.NoError(t, err)
	require.Len(t, updates, 1)
	assert.Equal(t, "@Andy hello", updates[0].Message.Text)
	assert.Equal(t, int64(-100), updates[0].Message.Chat.ID)

	srv.FailNextSends(1, 429, 3)
	_, err = api.Send(tgbotapi.NewMessage(42, "again"))
	var tgErr *tgbotapi.Error
	require.ErrorAs(t, err, &tgErr)
	assert.Equal(t, 429, tgErr.Code)
	assert.Equal(t, 3, tgErr.RetryAfter)
}
