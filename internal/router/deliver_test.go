package router

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/faketg"
	"github.com/clawpen/clawpen/internal/ops"
	"github.com/clawpen/clawpen/internal/store"
	"github.com/clawpen/clawpen/internal/telegram"
)

// gatedMessenger records sends; sends to a gated chat block until released.
type gatedMessenger struct {
	mu    sync.Mutex
	sent  []string
	gate  map[int64]chan struct{}
	fail  map[string]int // text -> failures still to answer
	notif chan string
}

func (m *gatedMessenger) Send(ctx context.Context, chatID int64, _ int, text string) error {
	m.mu.Lock()
	gate := m.gate[chatID]
	m.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	m.mu.Lock()
	if m.fail[text] > 0 {
		m.fail[text]--
		m.mu.Unlock()
		return fmt.Errorf("telegram: 502")
	}
	m.sent = append(m.sent, text)
	m.mu.Unlock()
	m.notif <- text
	return nil
}

func (m *gatedMessenger) Typing(context.Context, int64, int) error { return nil }

// SendFile delivers a file as a text naming it.
func (m *gatedMessenger) SendFile(ctx context.Context, chatID int64, thread int, kind, name string, _ []byte, _ string) error {
	return m.Send(ctx, chatID, thread, kind+":"+name)
}

// next waits for the next delivered text; the bound only ends a hung test.
func (m *gatedMessenger) next(t *testing.T) string {
	t.Helper()
	select {
	case s := <-m.notif:
		return s
	case <-time.After(time.Minute):
		t.Fatal("nothing delivered")
		return ""
	}
}

func TestDeliverChatsIndependentlyAndInOrder(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	slow := make(chan struct{})
	m := &gatedMessenger{gate: map[int64]chan struct{}{-1: slow}, fail: map[string]int{"b1": 1}, notif: make(chan string, 16)}
	r, err := New(ctx, Config{Store: st, Messenger: m, OwnerID: 1, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)

	_, err = st.Enqueue(ctx, []domain.Outgoing{{ChatID: -1, Text: "a1"}, {ChatID: -2, Text: "b1"}, {ChatID: -1, Text: "a2"}, {ChatID: -2, Text: "b2"}})
	require.NoError(t, err)
	done := make(chan struct{})
	go func() { r.deliver(ctx); close(done) }()

	// Chat -1 is stuck (paced, say); chat -2 is delivered meanwhile, in
	// order, its first message after one failed attempt.
	assert.Equal(t, "b1", m.next(t))
	assert.Equal(t, "b2", m.next(t))
	// A row queued while its chat's sender runs is picked up too: the
	// store says it was queued.
	_, err = st.Enqueue(ctx, []domain.Outgoing{{ChatID: -2, Text: "b3"}})
	require.NoError(t, err)
	assert.Equal(t, "b3", m.next(t))

	close(slow)
	assert.Equal(t, "a1", m.next(t))
	assert.Equal(t, "a2", m.next(t))
	cancel()
	<-done

	left, err := st.PendingOutbox(context.Background())
	require.NoError(t, err)
	assert.Empty(t, left)
	assert.Equal(t, []string{"b1", "b2", "b3", "a1", "a2"}, m.sent, "each exactly once")
}

// A file row keeps its chat's order and is sent once, by SendFile, after
// a failed attempt; its bytes leave the store with it.
func TestDeliverFileRowInOrder(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	m := &gatedMessenger{fail: map[string]int{"document:r.txt": 1}, notif: make(chan string, 16)}
	r, err := New(ctx, Config{Store: st, Messenger: m, OwnerID: 1, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)

	_, err = st.Enqueue(ctx, []domain.Outgoing{{ChatID: -1, Text: "before"}})
	require.NoError(t, err)
	f, err := st.EnqueueFile(ctx, domain.Outgoing{ChatID: -1, Kind: domain.OutDocument, FileName: "r.txt"}, []byte("x"))
	require.NoError(t, err)
	_, err = st.Enqueue(ctx, []domain.Outgoing{{ChatID: -1, Text: "after"}})
	require.NoError(t, err)
	done := make(chan struct{})
	go func() { r.deliver(ctx); close(done) }()
	assert.Equal(t, "before", m.next(t))
	assert.Equal(t, "document:r.txt", m.next(t))
	assert.Equal(t, "after", m.next(t))
	cancel()
	<-done
	assert.Equal(t, []string{"before", "document:r.txt", "after"}, m.sent, "each exactly once")
	_, err = st.OutboxFile(context.Background(), f.ID)
	assert.Error(t, err, "the bytes left with the row")
}

// visible is what a person reads of sent.
func visible(sent []faketg.SentMessage) []string {
	var out []string
	for _, s := range sent {
		out = append(out, s.Visible)
	}
	return out
}

// logWatch is a log a test can wait on, line by line.
type logWatch struct {
	mu   sync.Mutex
	text strings.Builder
	grew chan struct{}
}

func newLogWatch() *logWatch { return &logWatch{grew: make(chan struct{})} }

func (l *logWatch) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.text.Write(p)
	close(l.grew)
	l.grew = make(chan struct{})
	return len(p), nil
}

// waitLines waits until n lines hold every one of subs; the bound only
// ends a hung test.
func (l *logWatch) waitLines(t *testing.T, n int, subs ...string) {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		l.mu.Lock()
		found, grew := 0, l.grew
		for line := range strings.Lines(l.text.String()) {
			if !slices.ContainsFunc(subs, func(s string) bool { return !strings.Contains(line, s) }) {
				found++
			}
		}
		l.mu.Unlock()
		if found >= n {
			return
		}
		select {
		case <-grew:
		case <-timeout:
			t.Fatalf("fewer than %d log lines with %q; log:\n%s", n, subs, l.text.String())
		}
	}
}

// refusing is a router delivering to a fake Telegram from a real store
// whose database can be made to refuse to record rows sent, as a full
// disk would: a trigger, set from another connection as another process
// would.
type refusing struct {
	r    *Router
	st   *store.Store
	tg   *faketg.Server
	db   *sql.DB
	logs *logWatch
	seen *kinds
}

// fullDisk is the refusal's error.
const fullDisk = "database or disk is full"

func newRefusing(t *testing.T) *refusing {
	t.Helper()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "db")
	st, err := store.Open(ctx, path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	tg := faketg.New()
	t.Cleanup(tg.Close)
	client, err := telegram.New(ctx, telegram.Config{Token: "4242:secret", APIURL: tg.URL(), Logger: slog.New(slog.DiscardHandler),
		Pacing: telegram.Pacing{PerChatInterval: -1, GroupPerMinute: -1, GlobalPerSecond: -1}})
	require.NoError(t, err)
	f := &refusing{st: st, tg: tg, logs: newLogWatch(), seen: &kinds{}}
	f.r, err = New(ctx, Config{Store: st, Messenger: client, Agents: &agents{}, OwnerID: 1, Observer: f.seen,
		Ops:    ops.New(ops.Config{Store: st, GroupsDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)}),
		Logger: slog.New(slog.NewTextHandler(f.logs, nil))})
	require.NoError(t, err)
	f.db, err = sql.Open("sqlite3", path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.db.Close() })
	return f
}

// refuse makes the database refuse to record the rows of chats as sent.
func (f *refusing) refuse(t *testing.T, chats string) {
	_, err := f.db.ExecContext(t.Context(), `CREATE TRIGGER full_disk BEFORE DELETE ON outbox WHEN OLD.chat_id IN (`+chats+`)
		BEGIN SELECT RAISE(ABORT, '`+fullDisk+`'); END`)
	require.NoError(t, err)
}

// recover makes the database take the records again.
func (f *refusing) recover(t *testing.T) {
	_, err := f.db.ExecContext(t.Context(), `DROP TRIGGER full_disk`)
	require.NoError(t, err)
}

// deliver runs delivery until the returned stop is called.
func (f *refusing) deliver(t *testing.T) (stop func()) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { f.r.deliver(ctx); close(done) }()
	return func() { cancel(); <-done }
}

// A row Telegram accepted is not sent again while the database refuses to
// record it, however often the record fails: only the record is retried,
// the chat's later rows wait for it, another chat goes on, and /status and
// the observer say so. Files follow the same rule. Once the database takes
// writes again, the row is recorded and the chat goes on, each message
// having reached the fake Telegram once.
func TestAcceptedRowIsNotSentAgainWhileItsRecordFails(t *testing.T) {
	ctx := t.Context()
	f := newRefusing(t)
	r, st, tg := f.r, f.st, f.tg
	f.refuse(t, "-1, -3")
	_, err := st.Enqueue(ctx, []domain.Outgoing{{ChatID: -1, Text: "first"}, {ChatID: -1, Text: "second"}})
	require.NoError(t, err)
	_, err = st.EnqueueFile(ctx, domain.Outgoing{ChatID: -3, Kind: domain.OutDocument, FileName: "r.txt"}, []byte("report"))
	require.NoError(t, err)
	_, err = st.Enqueue(ctx, []domain.Outgoing{{ChatID: -3, Text: "after the file"}, {ChatID: -2, Text: "other chat"}})
	require.NoError(t, err)
	stop := f.deliver(t)

	// Each failing chat's record failed three times in a row.
	f.logs.waitLines(t, 3, "chat=-1", fullDisk)
	f.logs.waitLines(t, 3, "chat=-3", fullDisk)
	assert.Equal(t, []string{"first"}, visible(tg.SentTo(-1)), "sent once, the next row waits")
	assert.Len(t, tg.FilesTo(-3), 1, "the file sent once")
	assert.Empty(t, tg.SentTo(-3), "the row after the file waits")
	_, err = tg.WaitSent(ctx, -2, 1)
	require.NoError(t, err, "another chat goes on")
	status := r.status(ctx)
	assert.Contains(t, status, "Delivery: 2 messages sent but not yet recorded as sent: the database refuses (")
	assert.Contains(t, status, fullDisk)
	f.seen.mu.Lock()
	assert.GreaterOrEqual(t, f.seen.recordFailed, 6)
	f.seen.mu.Unlock()

	// The disk has room again: the rows are recorded, the chats go on.
	f.recover(t)
	_, err = tg.WaitSent(ctx, -1, 2)
	require.NoError(t, err)
	_, err = tg.WaitSent(ctx, -3, 1)
	require.NoError(t, err)
	stop()
	assert.Equal(t, []string{"first", "second"}, visible(tg.SentTo(-1)), "each exactly once")
	assert.Equal(t, []string{"after the file"}, visible(tg.SentTo(-3)))
	files := tg.FilesTo(-3)
	require.Len(t, files, 1, "the file exactly once")
	assert.Equal(t, "report", string(files[0].Data))
	left, err := st.PendingOutbox(context.Background())
	require.NoError(t, err)
	assert.Empty(t, left, "every row recorded")
	assert.NotContains(t, r.status(context.Background()), "Delivery:")
}

// A row whose chat became a supergroup while it was sent is under the new
// chat id while its record fails: delivery, woken by another chat's row,
// starts no sender that sends it again.
func TestMigratedRowIsNotSentAgainWhileItsRecordFails(t *testing.T) {
	ctx := t.Context()
	f := newRefusing(t)
	f.tg.MigrateChat(-1, -5)
	f.refuse(t, "-5")
	_, err := f.st.Enqueue(ctx, []domain.Outgoing{{ChatID: -1, Text: "hello"}})
	require.NoError(t, err)
	stop := f.deliver(t)
	defer stop()

	f.logs.waitLines(t, 1, "chat=-1", fullDisk)
	_, err = f.st.Enqueue(ctx, []domain.Outgoing{{ChatID: -2, Text: "wake"}})
	require.NoError(t, err)
	_, err = f.tg.WaitSent(ctx, -2, 1)
	require.NoError(t, err)
	f.logs.waitLines(t, 3, "chat=-1", fullDisk)
	assert.Equal(t, []string{"hello"}, visible(f.tg.SentTo(-5)), "sent once, to the supergroup")
	f.recover(t)
	require.Eventually(t, func() bool { rows, err := f.st.PendingOutbox(ctx); return err == nil && len(rows) == 0 },
		time.Minute, 10*time.Millisecond, "the row recorded")
	assert.Len(t, f.tg.SentTo(-5), 1)
}
