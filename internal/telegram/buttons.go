package telegram

import (
	"context"
	"fmt"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/clawpen/clawpen/internal/domain"
)

// SendButtons sends html (Telegram HTML the caller built, every untrusted
// part escaped) with one row of inline buttons, in one paced attempt, and
// answers the message's id. Its errors are Send's.
func (c *Client) SendButtons(ctx context.Context, chatID int64, html string, buttons []domain.Button) (int64, error) {
	row := make([]models.InlineKeyboardButton, 0, len(buttons))
	for _, b := range buttons {
		row = append(row, models.InlineKeyboardButton{Text: b.Text, CallbackData: b.Data})
	}
	if err := c.pace.wait(ctx, chatID); err != nil {
		return 0, err
	}
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	m, err := c.b.SendMessage(rctx, &bot.SendMessageParams{ChatID: chatID, Text: html, ParseMode: models.ParseModeHTML,
		ReplyMarkup: &models.InlineKeyboardMarkup{InlineKeyboard: [][]models.InlineKeyboardButton{row}}})
	if err != nil {
		return 0, sendFailure(chatID, "send buttons", c.redact(err))
	}
	return int64(m.ID), nil
}

// EditText replaces the text of the bot's message msgID in chatID with
// html, which also takes its buttons away, in one paced attempt.
func (c *Client) EditText(ctx context.Context, chatID, msgID int64, html string) error {
	if err := c.pace.wait(ctx, chatID); err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	_, err := c.b.EditMessageText(rctx, &bot.EditMessageTextParams{ChatID: chatID, MessageID: int(msgID), Text: html, ParseMode: models.ParseModeHTML})
	if err != nil {
		return sendFailure(chatID, fmt.Sprintf("edit message %d", msgID), c.redact(err))
	}
	return nil
}

// AnswerPress answers a button press (answerCallbackQuery): the presser's
// client stops waiting and shows text briefly.
func (c *Client) AnswerPress(ctx context.Context, id, text string) error {
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	if _, err := c.b.AnswerCallbackQuery(rctx, &bot.AnswerCallbackQueryParams{CallbackQueryID: id, Text: text}); err != nil {
		return fmt.Errorf("telegram: answer a button press: %w", c.redact(err))
	}
	return nil
}

// press reads a callback query: who pressed what on which message.
func press(q *models.CallbackQuery) *domain.Press {
	p := &domain.Press{ID: q.ID, From: q.From.ID, Data: q.Data}
	switch m := q.Message; {
	case m.Message != nil:
		p.ChatID, p.MessageID = m.Message.Chat.ID, int64(m.Message.ID)
	case m.InaccessibleMessage != nil:
		p.ChatID, p.MessageID = m.InaccessibleMessage.Chat.ID, int64(m.InaccessibleMessage.MessageID)
	}
	return p
}
