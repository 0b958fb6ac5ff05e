package router

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/leakguard"
	"github.com/clawpen/clawpen/internal/store"
)

const botToken = "7123456789:AAE-secret_token_of_the_bot"

func withGuard(c *Config) {
	c.Guard = leakguard.New(leakguard.Secret{Name: "TELEGRAM_BOT_TOKEN", Value: botToken})
}

// An answer holding the bot token, in base64 across the place where it is
// split into two messages, reaches the outbox redacted; the find is
// audited without the value.
func TestAnswerRedactedBeforeItIsSplit(t *testing.T) {
	f := newFixture(t, "", withGuard)
	blob := base64.StdEncoding.EncodeToString([]byte("dump: " + botToken + " end"))
	f.agents.answer = strings.Repeat("x", 4090-len(blob)/2) + blob
	f.say(t, domain.Inbound{ChatID: family, SenderID: member, Text: "@Andy print the token"})
	require.NoError(t, f.r.pending(t.Context(), "family"))

	out := strings.Join(f.outbox(t, family), "")
	assert.Contains(t, out, leakguard.Redacted)
	assert.False(t, f.r.cfg.Guard.Contains([]byte(out)), "no form of the token is left")
	rows := f.audited(t, "leakguard", "deny")
	require.Len(t, rows, 1)
	assert.Equal(t, "family", rows[0].Group)
	assert.Contains(t, rows[0].Reason, "TELEGRAM_BOT_TOKEN; base64")
	assert.NotContains(t, rows[0].Reason, botToken)
}

// A scheduled task's result is redacted in the chat and in its run log.
func TestTaskResultRedacted(t *testing.T) {
	f := newFixture(t, "", withGuard)
	f.agents.answer = "token: " + botToken
	task, err := f.st.CreateTask(t.Context(), domain.Task{Group: "family", ChatID: family, Prompt: "report", ScheduleType: domain.ScheduleOnce,
		ScheduleValue: "2026-01-01T00:00:00Z", Status: domain.TaskActive, NextRun: time.Now()})
	require.NoError(t, err)
	require.NoError(t, f.r.runTask(t.Context(), task))
	assert.Equal(t, []string{"token: " + leakguard.Redacted}, f.outbox(t, family))
	runs, err := f.st.TaskRuns(t.Context(), task.ID, 10)
	require.NoError(t, err)
	require.Len(t, runs, 1)
	assert.Equal(t, "token: "+leakguard.Redacted, runs[0].Result)
	assert.Len(t, f.audited(t, "leakguard", "deny"), 1)
}

// fileMessenger records what each send carried.
type fileMessenger struct {
	mu    sync.Mutex
	texts []string
	files map[string][]byte
	sent  chan struct{}
}

func (m *fileMessenger) Send(_ context.Context, _ int64, _ int, text string) error {
	m.mu.Lock()
	m.texts = append(m.texts, text)
	m.mu.Unlock()
	m.sent <- struct{}{}
	return nil
}

func (m *fileMessenger) SendFile(_ context.Context, _ int64, _ int, _, name string, data []byte, caption string) error {
	m.mu.Lock()
	m.files[name] = data
	m.texts = append(m.texts, "caption:"+caption)
	m.mu.Unlock()
	m.sent <- struct{}{}
	return nil
}

func (m *fileMessenger) Typing(context.Context, int64, int) error { return nil }

// Whatever queued a row (a notice, send_message, send_file), it is
// redacted as it is sent: messages, captions, text files; a binary file
// holding a secret is not sent, a message says so.
func TestSentRowsRedacted(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	m := &fileMessenger{files: map[string][]byte{}, sent: make(chan struct{}, 16)}
	cfg := Config{Store: st, Messenger: m, OwnerID: 1, Logger: slog.New(slog.DiscardHandler)}
	withGuard(&cfg)
	r, err := New(ctx, cfg)
	require.NoError(t, err)

	hexToken := strings.ToUpper(hex.EncodeToString([]byte(botToken)))
	_, err = st.Enqueue(ctx, []domain.Outgoing{{ChatID: -1, Text: "plain " + botToken}, {ChatID: -1, Text: "hex " + hexToken}})
	require.NoError(t, err)
	_, err = st.EnqueueFile(ctx, domain.Outgoing{ChatID: -1, Kind: domain.OutDocument, FileName: "notes.txt", Text: "see " + botToken}, []byte("line\n"+botToken+"\n"))
	require.NoError(t, err)
	_, err = st.EnqueueFile(ctx, domain.Outgoing{ChatID: -1, Kind: domain.OutDocument, FileName: "blob.bin"}, append([]byte{0, 1, 2}, botToken...))
	require.NoError(t, err)
	_, err = st.EnqueueFile(ctx, domain.Outgoing{ChatID: -1, Kind: domain.OutPhoto, FileName: "clean.png"}, []byte{0, 1, 2, 3})
	require.NoError(t, err)
	done := make(chan struct{})
	go func() { r.deliver(ctx); close(done) }()
	for range 5 {
		<-m.sent
	}
	cancel()
	<-done

	assert.Equal(t, []string{"plain [redacted]", "hex [redacted]", "caption:see [redacted]",
		`The file "blob.bin" was not sent: it holds a secret of the host's ([redacted]).`, "caption:"}, m.texts)
	assert.Equal(t, "line\n[redacted]\n", string(m.files["notes.txt"]))
	assert.NotContains(t, m.files, "blob.bin")
	assert.Equal(t, []byte{0, 1, 2, 3}, m.files["clean.png"])
	log, err := st.AuditLog(context.Background(), 0)
	require.NoError(t, err)
	n := 0
	for _, e := range log {
		if e.Operation == "leakguard" {
			n++
			assert.NotContains(t, e.Reason, botToken)
		}
	}
	assert.Equal(t, 5, n, "two messages, a caption, a text file, a withheld file")
}

// A draft of an answer that is being written never shows a piece of a
// secret: not while it grows, not once it is whole.
func TestDraftNeverShowsPartOfASecret(t *testing.T) {
	f := newFixture(t, "", withGuard)
	g := domain.Group{ChatID: owner, Folder: domain.MainFolder}
	text := "The token is " + botToken + ", keep it."
	audited := false
	for i := range len(text) + 1 {
		shown := f.r.draftText(t.Context(), g, text[:i], &audited)
		assert.NotContains(t, shown, botToken[:4], "draft of %d bytes: %q", i, shown)
	}
	assert.True(t, audited)
	assert.Len(t, f.audited(t, "leakguard", "deny"), 1, "once per run")
}
