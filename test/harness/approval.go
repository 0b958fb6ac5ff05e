package harness

import (
	"context"
	"strings"

	"github.com/clawpen/clawpen/internal/faketg"
)

// isApproval reports whether m is the host asking the owner for approval.
func isApproval(m faketg.SentMessage) bool { return strings.HasPrefix(m.Visible, "Approval needed") }

// Approval waits until the owner has been asked for approval n times and
// returns the n-th question as it is now.
func (h *Host) Approval(n int) faketg.SentMessage {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	got, err := h.TG.WaitMatching(ctx, OwnerID, n, isApproval)
	if err != nil {
		h.t.Fatalf("waiting for approval request %d: %v\nhost log:\n%s", n, err, h.Stderr.String())
	}
	return got[n-1]
}

// Approvals are the approval questions the owner got so far.
func (h *Host) Approvals() []faketg.SentMessage {
	var out []faketg.SentMessage
	for _, m := range h.TG.SentTo(OwnerID) {
		if isApproval(m) {
			out = append(out, m)
		}
	}
	return out
}

// Button is the data of m's button labelled text ("" when it has none).
func Button(m faketg.SentMessage, text string) string {
	for _, row := range m.Keyboard {
		for _, b := range row {
			if b.Text == text {
				return b.CallbackData
			}
		}
	}
	return ""
}

// Press presses the button labelled text on m as user from (in that
// user's view of m's chat) and returns the host's answer to the press.
func (h *Host) Press(from int64, m faketg.SentMessage, text string) string {
	h.t.Helper()
	data := Button(m, text)
	if data == "" {
		h.t.Fatalf("message %d has no button %q: %+v", m.MessageID, text, m.Keyboard)
	}
	return h.PressData(from, m.ChatID, m.MessageID, data)
}

// PressData sends a press with any data on any message, as a modified
// client can, and returns the host's answer to it.
func (h *Host) PressData(from, chatID, msgID int64, data string) string {
	h.t.Helper()
	id := h.TG.Press(faketg.User{ID: from, FirstName: "presser"}, chatID, msgID, data)
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	a, err := h.TG.WaitAnswer(ctx, id)
	if err != nil {
		h.t.Fatalf("press %q on message %d: %v\nhost log:\n%s", data, msgID, err, h.Stderr.String())
	}
	return a.Text
}

// WaitEdited waits until m's text holds substr and returns it as it is then.
func (h *Host) WaitEdited(m faketg.SentMessage, substr string) faketg.SentMessage {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	got, err := h.TG.WaitMessage(ctx, m.ChatID, m.MessageID, func(m faketg.SentMessage) bool { return strings.Contains(m.Visible, substr) })
	if err != nil {
		h.t.Fatalf("%v\nhost log:\n%s", err, h.Stderr.String())
	}
	return got
}
