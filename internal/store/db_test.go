package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/store/pgtest"
)

// testDB is one database the store's tests run on. Every test of the
// store's behaviour runs once on each (forEachDB), so SQLite and
// PostgreSQL are held to the same behaviour by the same tests; what only
// one of them has (SQLite's file modes, its backup API) is tested alone.
// PostgreSQL runs on a server the tests start (pgtest): a machine without
// it reports those subtests skipped, with the reason.
type testDB struct {
	name string
	pg   bool
	// fresh makes an empty database and returns where it is: a file path
	// or a PostgreSQL URL.
	fresh func(t testing.TB) string
	// open opens a *Store on where, as serve does.
	open func(ctx context.Context, where string) (*Store, error)
}

var (
	sqliteDB = testDB{name: "sqlite",
		fresh: func(t testing.TB) string { return filepath.Join(t.TempDir(), "data", "clawpen.db") },
		open:  Open}
	postgresDB = testDB{name: "postgres", pg: true, fresh: pgtest.NewDatabase, open: OpenPostgres}
	testDBs    = []testDB{sqliteDB, postgresDB}
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// forEachDB runs test once on each database, as a subtest named for it.
func forEachDB(t *testing.T, test func(t *testing.T, db testDB)) {
	t.Helper()
	for _, db := range testDBs {
		t.Run(db.name, func(t *testing.T) { test(t, db) })
	}
}

// openTest opens a store on a fresh database, closed when t ends; where
// opens it again.
func (db testDB) openTest(t testing.TB) (s *Store, where string) {
	t.Helper()
	where = db.fresh(t)
	s, err := db.open(context.Background(), where)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s, where
}

// setSchemaVersion records v as the database's schema version, as a newer
// program would have.
func setSchemaVersion(t *testing.T, s *Store, v int) {
	t.Helper()
	var err error
	if s.pg {
		_, err = s.w.Exec(`INSERT INTO clawpen_migrations (version, name, applied) VALUES ($1, 'future', 0)`, v)
	} else {
		_, err = s.w.Exec(`PRAGMA user_version = ` + fmt.Sprint(v))
	}
	require.NoError(t, err)
}
