package cli

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/store"
	"github.com/clawpen/clawpen/internal/store/pgtest"
)

func TestParseSince(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Time
		bad  bool
	}{
		{in: "24h", want: now.Add(-24 * time.Hour)},
		{in: "90m", want: now.Add(-90 * time.Minute)},
		{in: "2026-11-01", want: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)},
		{in: "2026-11-01T08:30:00+01:00", want: time.Date(2026, 11, 1, 7, 30, 0, 0, time.UTC)},
		{in: "-5h", bad: true},
		{in: "last week", bad: true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parseSince(tc.in, now, time.UTC)
			if tc.bad {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.True(t, tc.want.Equal(got), "%v != %v", tc.want, got)
		})
	}
}

func TestAuditCommandFiltersAndPrintsJSON(t *testing.T) {
	h := newHost(t)
	st, err := store.Open(context.Background(), filepath.Join(h.dir, "data", "clawpen.db"))
	require.NoError(t, err)
	old := time.Now().Add(-48 * time.Hour)
	require.NoError(t, st.Audit(context.Background(), domain.AuditEntry{Group: "family", Operation: "ipc.send_message", Decision: "deny", Reason: "OLD group \"family\" may only send messages to its own chat", Time: old}))
	require.NoError(t, st.Audit(context.Background(), domain.AuditEntry{Group: "family", Operation: "ipc.schedule_task", Decision: "deny", Reason: "NEW group \"family\" may only schedule tasks for itself"}))
	require.NoError(t, st.Audit(context.Background(), domain.AuditEntry{Group: "work", Operation: "mount", Decision: "deny", Reason: "WORK mount refused"}))
	require.NoError(t, st.Close())

	out := h.ok("audit")
	assert.Contains(t, out, "OLD")
	assert.Contains(t, out, "WORK")
	assert.Less(t, strings.Index(out, "WORK"), strings.Index(out, "OLD"), "newest first")

	out = h.ok("audit", "--group", "family", "--since", "24h")
	assert.Contains(t, out, "NEW")
	assert.NotContains(t, out, "OLD")
	assert.NotContains(t, out, "WORK")

	out = h.ok("audit", "--json", "--group=family")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2)
	var e domain.AuditEntry
	require.NoError(t, json.Unmarshal([]byte(lines[1]), &e))
	assert.Equal(t, "ipc.send_message", e.Operation)
	assert.Equal(t, "deny", e.Decision)
	assert.Contains(t, e.Reason, "may only send messages to its own chat", "a refusal names the rule")

	code, _, errs := h.run("audit", "--since", "yesterday-ish")
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, "--since")
}

func TestBackupCommand(t *testing.T) {
	h := newHost(t)
	h.ok("groups", "add", "-100", "family")
	dst := filepath.Join(h.dir, "backup.db")
	out := h.ok("backup", dst)
	assert.Contains(t, out, "To restore it: stop clawpen serve")
	assert.Contains(t, out, filepath.Join(h.dir, "data", "clawpen.db"))
	b, err := store.Open(context.Background(), dst)
	require.NoError(t, err)
	defer b.Close()
	_, ok, err := b.GroupByFolder(context.Background(), "family")
	require.NoError(t, err)
	assert.True(t, ok, "the copy holds the group")

	code, _, errs := h.run("backup", dst)
	assert.Equal(t, 1, code, "an existing file is not overwritten")
	assert.Contains(t, errs, "exists")
}

// With CLAWPEN_DATABASE_URL the backup is pg_dump's, and the restore the
// command prints brings the group back into an empty database.
func TestBackupCommandPostgres(t *testing.T) {
	h := newHost(t)
	h.env["CLAWPEN_DATABASE_URL"] = pgtest.NewDatabase(t)
	h.ok("groups", "add", "-100", "family")
	dst := filepath.Join(h.dir, "backup.dump")
	out := h.ok("backup", dst)
	assert.Contains(t, out, "Backup of PostgreSQL postgres@")
	assert.Contains(t, out, "pg_restore --no-owner --exit-on-error --dbname=<CLAWPEN_DATABASE_URL> "+dst)

	restored := pgtest.NewDatabase(t)
	res, err := exec.Command("pg_restore", "--no-owner", "--exit-on-error", "--dbname="+restored, dst).CombinedOutput()
	require.NoError(t, err, "%s", res)
	b, err := store.OpenPostgres(context.Background(), restored)
	require.NoError(t, err)
	defer b.Close()
	_, ok, err := b.GroupByFolder(context.Background(), "family")
	require.NoError(t, err)
	assert.True(t, ok, "the copy holds the group")

	code, _, errs := h.run("backup", dst)
	assert.Equal(t, 1, code, "an existing file is not overwritten")
	assert.Contains(t, errs, "exists")
}

func TestHealthCommand(t *testing.T) {
	h := newHost(t)
	code, _, errs := h.run("health")
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "CLAWPEN_METRICS_ADDR is not set")

	var ready atomic.Bool
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" && !ready.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("not ready\ntelegram: getUpdates last answered 40s ago\n"))
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	h.env["CLAWPEN_METRICS_ADDR"] = ":" + port // every address: asked on loopback

	code, _, errs = h.run("health")
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "telegram: getUpdates last answered 40s ago")
	h.ok("health", "--live")
	ready.Store(true)
	h.ok("health")
}
