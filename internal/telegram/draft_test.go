package telegram

import (
	"net/http"
	"testing"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/faketg"
)

func TestDraftShowsHTMLInPrivateChat(t *testing.T) {
	e := newEnv(t)
	require.NoError(t, e.c.Draft(testCtx(t), 31, 0, 7, "**Hello** wor"))
	require.NoError(t, e.c.Draft(testCtx(t), 31, 0, 7, "**Hello** world <b"))
	got := e.srv.Drafts(31)
	require.Len(t, got, 2)
	assert.Equal(t, int64(7), got[0].DraftID)
	assert.Equal(t, "Hello wor", got[0].Visible)
	assert.Equal(t, "HTML", got[0].ParseMode)
	assert.Equal(t, "Hello world <b", got[1].Visible, "markdown's own text is escaped")
	assert.Empty(t, e.srv.SentTo(31), "a draft is no message")
}

func TestDraftRefusedSaysWhy(t *testing.T) {
	e := newEnv(t)
	require.Error(t, e.c.Draft(testCtx(t), -100123, 0, 7, "groups get no drafts"))
	e.srv.FailDrafts(http.StatusInternalServerError)
	require.Error(t, e.c.Draft(testCtx(t), 31, 0, 7, "x"))
	assert.Equal(t, 2, e.srv.Calls("sendMessageDraft"), "a refused draft is not tried again")
	assert.Empty(t, e.srv.Drafts(31))
}

func TestSetCommandMenuOwnerChatOnly(t *testing.T) {
	e := newEnv(t)
	// An older version's menu for every chat is taken away.
	_, err := e.c.b.SetMyCommands(testCtx(t), &bot.SetMyCommandsParams{Commands: []models.BotCommand{{Command: "groups", Description: "x"}}})
	require.NoError(t, err)
	require.NoError(t, e.c.SetCommandMenu(testCtx(t), 0, []Command{{Name: "help", Description: "Show help"}}))
	assert.Empty(t, e.srv.CommandScopes(), "no owner yet: no menu anywhere")

	require.NoError(t, e.c.SetCommandMenu(testCtx(t), 42, []Command{{Name: "/help", Description: "Show help"}, {Name: "status", Description: "Status"}}))
	assert.Equal(t, []string{"chat:42"}, e.srv.CommandScopes())
	assert.Equal(t, []faketg.Command{{Command: "help", Description: "Show help"}, {Command: "status", Description: "Status"}}, e.srv.CommandsFor("chat:42"))
	require.Error(t, e.c.SetCommandMenu(testCtx(t), 42, []Command{{Name: "Bad Name", Description: "x"}}))
}
