package faketg

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sendMessageDraft is checked as Telegram checks it, recorded, and can be
// made to fail, from Go or over HTTP.
func TestSendMessageDraft(t *testing.T) {
	s := New()
	defer s.Close()
	for _, tc := range []struct {
		name   string
		params map[string]any
		code   float64 // 0: accepted
	}{
		{"accepted", map[string]any{"chat_id": 5, "draft_id": "9", "text": "<b>Hel</b>lo", "parse_mode": "HTML"}, 0},
		{"a group", map[string]any{"chat_id": -100, "draft_id": 9, "text": "x"}, 400},
		{"no draft id", map[string]any{"chat_id": 5, "text": "x"}, 400},
		{"draft id zero", map[string]any{"chat_id": 5, "draft_id": 0, "text": "x"}, 400},
		{"empty text", map[string]any{"chat_id": 5, "draft_id": 9, "text": " "}, 400},
		{"bad HTML", map[string]any{"chat_id": 5, "draft_id": 9, "text": "<b>x", "parse_mode": "HTML"}, 400},
		{"too long", map[string]any{"chat_id": 5, "draft_id": 9, "text": strings.Repeat("x", 4097)}, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := post(t, s, "sendMessageDraft", tc.params)
			if tc.code == 0 {
				assert.Equal(t, true, out["ok"])
			} else {
				assert.Equal(t, tc.code, out["error_code"])
			}
		})
	}
	got := s.Drafts(5)
	require.Len(t, got, 1)
	assert.Equal(t, Draft{ChatID: 5, DraftID: 9, Text: "<b>Hel</b>lo", Visible: "Hello", ParseMode: "HTML", Time: got[0].Time}, got[0])
	assert.Empty(t, s.SentTo(5), "a draft is no message")

	resp, err := http.Post(s.URL()+"/control/drafts/fail", "application/json", strings.NewReader(`{"code":429}`))
	require.NoError(t, err)
	resp.Body.Close()
	out := post(t, s, "sendMessageDraft", map[string]any{"chat_id": 5, "draft_id": 9, "text": "more"})
	assert.Equal(t, float64(429), out["error_code"])
	s.FailDrafts(0)
	post(t, s, "sendMessageDraft", map[string]any{"chat_id": 5, "draft_id": 9, "text": "more"})
	assert.Equal(t, 9, s.Calls("sendMessageDraft"))

	resp, err = http.Get(s.URL() + "/control/drafts?chat_id=5")
	require.NoError(t, err)
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var drafts []Draft
	require.NoError(t, json.Unmarshal(data, &drafts))
	require.Len(t, drafts, 2)
	assert.Equal(t, "more", drafts[1].Visible)
}
