package store

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// leadWait bounds waits for the lock to change hands; the machine may be busy.
const leadWait = time.Minute

// takeLeadAsync starts TakeLead for name and says, on its channels, whom
// it waited for and when it holds the lock.
func takeLeadAsync(ctx context.Context, url, name string) (waited <-chan string, got <-chan *Lead, failed <-chan error) {
	w, g, f := make(chan string, 16), make(chan *Lead, 1), make(chan error, 1)
	go func() {
		l, err := TakeLead(ctx, url, name, func(holder string, err error) {
			if err == nil {
				w <- holder
			}
		})
		if err != nil {
			f <- err
			return
		}
		g <- l
	}()
	return w, g, f
}

// One host holds the lock at a time: a second waits, naming the holder,
// and gets the lock as soon as the first gives it up.
func TestLeadOneHolderAtATime(t *testing.T) {
	s, url := postgresDB.openTest(t)
	ctx := t.Context()
	a, err := TakeLead(ctx, url, "host a", func(string, error) { t.Error("the first host waited") })
	require.NoError(t, err)

	holder, err := s.LeadHolder(ctx)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(holder, "host a ("), holder)

	waited, got, failed := takeLeadAsync(ctx, url, "host b")
	select {
	case h := <-waited:
		assert.True(t, strings.HasPrefix(h, "host a ("), "b waits for a: %s", h)
	case l := <-got:
		l.Release()
		t.Fatal("b took the lock while a held it")
	case err := <-failed:
		t.Fatal(err)
	}
	require.NoError(t, a.Context().Err(), "a still holds it")

	a.Release()
	assert.NoError(t, a.Err(), "a release is not a loss")
	select {
	case b := <-got:
		defer b.Release()
		holder, err := s.LeadHolder(ctx)
		require.NoError(t, err)
		assert.True(t, strings.HasPrefix(holder, "host b ("), holder)
	case err := <-failed:
		t.Fatal(err)
	case <-time.After(leadWait):
		t.Fatal("b did not take the lock a gave up")
	}
}

// A holder whose connection dies (the server ends its session, as when an
// operator kills it or the server restarts) learns it: its context ends
// with ErrLeadLost, and another host takes over.
func TestLeadLostWhenItsConnectionDies(t *testing.T) {
	_, url := postgresDB.openTest(t)
	ctx := t.Context()
	a, err := TakeLead(ctx, url, "host a", func(string, error) {})
	require.NoError(t, err)
	defer a.Release()
	waited, got, failed := takeLeadAsync(ctx, url, "host b")
	select {
	case <-waited:
	case err := <-failed:
		t.Fatal(err)
	}

	admin, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer admin.Close(ctx)
	var killed bool
	require.NoError(t, admin.QueryRow(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'host a'`).Scan(&killed))
	require.True(t, killed)

	select {
	case <-a.Context().Done():
		require.ErrorIs(t, a.Err(), ErrLeadLost)
	case <-time.After(leadWait):
		t.Fatal("a did not notice it lost the lock")
	}
	select {
	case b := <-got:
		b.Release()
	case err := <-failed:
		t.Fatal(err)
	case <-time.After(leadWait):
		t.Fatal("b did not take over")
	}
}

// A URL that does not connect is an error at once, not a wait.
func TestTakeLeadFailsOnABadDatabase(t *testing.T) {
	url := postgresDB.fresh(t)
	bad := strings.Replace(url, "/clawpen_", "/no_such_database_", 1)
	_, err := TakeLead(t.Context(), bad, "host", func(string, error) { t.Error("waited") })
	require.ErrorContains(t, err, "no_such_database_")
}

// SQLite has no serving lock: nobody holds it.
func TestLeadHolderOfSQLite(t *testing.T) {
	s, _ := sqliteDB.openTest(t)
	h, err := s.LeadHolder(t.Context())
	require.NoError(t, err)
	assert.Empty(t, h)
}
