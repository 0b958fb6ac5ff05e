package e2e

import (
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/test/harness"
)

// A host on PostgreSQL whose hold on the serving lock ends while it runs
// (here the server ends the lock's session, as an operator or a restart
// would) stops serving at once and exits non-zero, saying why; the host
// that stood by takes over and answers. A standby stopped while it waits
// exits cleanly.
func TestPostgresHostStopsWhenItLosesTheLock(t *testing.T) {
	a := harness.New(t, harness.Options{Owner: true, Postgres: true})
	a.OwnerSays("before")
	a.WaitFor(harness.OwnerID, "before")
	b := harness.New(t, harness.Options{Owner: true, Share: a})
	// A standby stopped while it waits ends cleanly.
	c := harness.New(t, harness.Options{Owner: true, Share: a})
	require.NoError(t, syscall.Kill(c.PID(), syscall.SIGTERM))
	require.NoError(t, c.WaitExit(), "a standby stops with status 0; log:\n%s", c.Stderr.String())

	ctx := harness.Ctx(t)
	admin, err := pgx.Connect(ctx, a.DatabaseURL)
	require.NoError(t, err)
	defer admin.Close(ctx)
	tag, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE application_name LIKE 'clawpen serve on %, pid ' || $1`, strconv.Itoa(a.PID()))
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected(), "a's lock session")

	err = a.WaitExit()
	require.Error(t, err, "a exits non-zero")
	assert.Contains(t, a.Stderr.String(), "lost the database's serving lock")

	b.WaitLog("clawpen serving")
	b.OwnerSays("after")
	b.WaitFor(harness.OwnerID, "after")
	n := 0
	for _, s := range harness.Texts(b.TG.SentTo(harness.OwnerID)) {
		if strings.Contains(s, "after") {
			n++
		}
	}
	assert.Equal(t, 1, n, "answered once")
}
