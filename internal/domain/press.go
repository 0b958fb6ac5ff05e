package domain

// Button is an inline button under a message of the host's: its label and
// the data a press of it sends back.
type Button struct {
	Text, Data string
}

// Press is a user's press of an inline button on one of the bot's
// messages (a Telegram callback query). Everything in it but ID comes from
// the user's client: a modified client can send any data for any message
// it can see, so the receiver checks each field against what it sent.
type Press struct {
	ID        string // the query's id, to answer it
	From      int64  // the user who pressed
	ChatID    int64  // the chat of the message pressed on
	MessageID int64  // that message (0 when Telegram did not name one)
	Data      string
}
