package telegram

import (
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzDecodeUpdate feeds arbitrary update JSON to the decoder: it must never
// panic, and an update it accepts keeps its id so the offset can advance.
func FuzzDecodeUpdate(f *testing.F) {
	f.Add(`{"update_id":1,"message":{"message_id":2,"date":1,"chat":{"id":-100,"type":"supergroup","title":"t"},"from":{"id":5,"first_name":"A"},"text":"@andy_test_bot hi","entities":[{"type":"mention","offset":0,"length":14}]}}`)
	f.Add(`{"update_id":3,"message":{"message_id":4,"chat":{"id":1,"type":"private"},"text":"x","entities":[{"type":"mention","offset":-5,"length":99}]}}`)
	f.Add(`{"update_id":5,"message":{"message_id":"bad"}}`)
	f.Add(`{"update_id":6,"message":{"chat":{"id":1},"reply_to_message":{"from":{"id":1000001}},"migrate_to_chat_id":-1009}}`)
	f.Add(`{"update_id":7,"callback_query":{"id":"q","from":{"id":5,"first_name":"A"},"message":{"message_id":9,"date":1,"chat":{"id":5,"type":"private"}},"chat_instance":"c","data":"ap:x:o"}}`)
	f.Add(`{"update_id":8,"callback_query":{"id":"q","from":{"id":5},"message":{"message_id":9,"date":0,"chat":{"id":5}},"data":"x"}}`)
	f.Add(`[]`)
	c := &Client{log: slog.New(slog.DiscardHandler), username: "andy_test_bot", botID: 1000001}
	f.Fuzz(func(t *testing.T, raw string) {
		u, ok := c.decodeUpdate(json.RawMessage(raw))
		if !ok {
			return
		}
		var id struct {
			UpdateID int64 `json:"update_id"`
		}
		require.NoError(t, json.Unmarshal([]byte(raw), &id), "accepted updates have a readable id")
		require.Equal(t, id.UpdateID, u.UpdateID)
	})
}
