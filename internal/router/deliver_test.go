package router

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/store"
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
