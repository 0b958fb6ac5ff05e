package e2e

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/test/harness"
)

// TestSplitAnswerArrivesOncePerPartDespiteServerErrors injects 5xx answers
// between the parts of a long answer full of characters that HTML escaping
// lengthens: every part arrives exactly once, in order.
func TestSplitAnswerArrivesOncePerPartDespiteServerErrors(t *testing.T) {
	h := harness.New(t, harness.Options{Owner: true})
	var words []string
	for i := range 1400 {
		words = append(words, fmt.Sprintf("<&%04d", i))
	}
	h.TG.FailSendsAfter(1, 4, 500, 0)
	h.OwnerSays("REPLY " + strings.Join(words, " "))
	h.Replies(harness.OwnerID, 3)

	sent := h.TG.SentTo(harness.OwnerID)
	require.Len(t, sent, 3, "three parts, none twice")
	var all strings.Builder
	for _, s := range sent {
		all.WriteString(s.Visible)
		all.WriteString(" ")
	}
	last := -1
	for _, w := range words {
		require.Equal(t, 1, strings.Count(all.String(), w+" "), "%s arrived once", w)
		idx := strings.Index(all.String(), w+" ")
		require.Greater(t, idx, last, "%s in order", w)
		last = idx
	}
}

// TestEscapingDoesNotSplitAnswer: an answer of 4,000 visible characters full of
// '<' and '&' is one message (Telegram counts the text after parsing
// entities), sent once even when the first attempts fail.
func TestEscapingDoesNotSplitAnswer(t *testing.T) {
	h := harness.New(t, harness.Options{Owner: true})
	h.TG.FailNextSends(2, 502, 0)
	text := strings.Repeat("<&", 2000)
	h.OwnerSays("REPLY " + text)
	h.Replies(harness.OwnerID, 1)
	sent := h.TG.SentTo(harness.OwnerID)
	require.Len(t, sent, 1)
	assert.True(t, text == sent[0].Visible, "the whole answer in one message (%d of %d characters)", len(sent[0].Visible), len(text))
	assert.Equal(t, "HTML", sent[0].ParseMode)
}

// TestAcceptedAnswerIsNotSentAgainWhileItsRecordFails: the host's database
// refuses to record the group's messages as sent (a trigger in the real
// database, refusing as a full disk would). The answer, and then a file the
// agent sends with send_file, each reach Telegram once however often the
// record fails; /status (the owner's chat goes on meanwhile) and the
// metrics say so; once the database takes the writes the rows are recorded
// and the chat goes on, nothing sent twice.
func TestAcceptedAnswerIsNotSentAgainWhileItsRecordFails(t *testing.T) {
	addr := freeLoopbackAddr(t)
	h := harness.New(t, harness.Options{Owner: true, Extra: map[string]string{"CLAWPEN_METRICS_ADDR": addr}})
	h.RegisterGroup(t, "family")
	db, err := sql.Open("sqlite3", filepath.Join(h.Dir, "data", "clawpen.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	const full = "database or disk is full"
	refuse := func() {
		_, err := db.Exec(fmt.Sprintf(`CREATE TRIGGER full_disk BEFORE DELETE ON outbox WHEN OLD.chat_id = %d
			BEGIN SELECT RAISE(ABORT, '%s'); END`, harness.GroupChat, full))
		require.NoError(t, err)
	}
	recovered := func() {
		_, err := db.Exec(`DROP TRIGGER full_disk`)
		require.NoError(t, err)
		h.WaitDelivered()
	}
	group := func(text string) {
		h.Say(harness.GroupChat, "supergroup", "Family Chat", harness.MemberID, "@Andy "+text)
	}
	metric := func(series string) float64 { _, body := get(t, addr, "/metrics"); return sample(body, series) }

	refuse()
	group("REPLY the plan is set")
	h.Replies(harness.GroupChat, 1)
	h.WaitLogCount(full, 3)
	require.Len(t, h.TG.SentTo(harness.GroupChat), 1, "the answer went out once, its record failing three times")
	h.OwnerSays("/status")
	h.WaitFor(harness.OwnerID, "Delivery: 1 message sent but not yet recorded as sent: the database refuses")
	assert.Equal(t, 1.0, metric("clawpen_outbox_unrecorded_messages"))
	assert.GreaterOrEqual(t, metric("clawpen_outbox_record_failures_total"), 3.0)
	recovered()
	assert.Equal(t, 0.0, metric("clawpen_outbox_unrecorded_messages"))

	refuse()
	failed := strings.Count(h.Stderr.String(), full)
	group(strings.Join([]string{
		toolLine("bash", map[string]any{"command": "printf 'sent once' > /workspace/group/keep.txt"}),
		toolLine("send_file", map[string]any{"path": "/workspace/group/keep.txt"}),
		"REPLY filed",
	}, "\n"))
	h.WaitLogCount(full, failed+3)
	require.Len(t, h.TG.FilesTo(harness.GroupChat), 1, "the file went out once, its record failing three times")
	require.Len(t, h.TG.SentTo(harness.GroupChat), 1, "the answer waits behind the file")
	recovered()

	assert.Equal(t, []string{"the plan is set", "filed"}, harness.Texts(h.TG.SentTo(harness.GroupChat)), "each answer once")
	files := h.TG.FilesTo(harness.GroupChat)
	require.Len(t, files, 1, "the file once")
	assert.Equal(t, "sent once", string(files[0].Data))
}
