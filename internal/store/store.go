// Package store is clawpen's persistence: chats, messages, groups,
// cursors, tasks, the outbox, handled commands, router state and the audit
// log, in SQLite (the default, a file in the data dir) or PostgreSQL
// (CLAWPEN_DATABASE_URL), behind one API and one set of queries.
//
// One *sql.DB with a single connection does all writes, and a second pool
// serves reads. In SQLite that is its own rule (one writer; queuing in Go is
// cheaper than spinning on SQLITE_BUSY; WAL lets readers run beside it);
// explicit transactions are BEGIN IMMEDIATE, so a second process (the CLI
// while `serve` runs) waits on the busy timeout instead of failing with
// "database is locked" on a read-to-write upgrade. PostgreSQL keeps the
// single writer too: a message's seq is taken when it is inserted, and
// cursors assume seqs commit in order, which one writer per host (and one
// serving host, see Lead) gives.
//
// The queries are written once, in SQL both accept: $N placeholders, ON
// CONFLICT, RETURNING, CASE instead of SQLite's two-argument max. SQLite
// reads $N as a named parameter and numbers those by first appearance, not
// by N, so a query must use $1, $2, ... in the order they first appear.
// Where the two differ (types, the size, the backup, the schema version)
// the store says so where it happens; migrations that differ come in two
// files under one number (see loadMigrations).
package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/mattn/go-sqlite3" // also registers the "sqlite3" driver
)

// ErrNotFound is returned when a row addressed by id does not exist.
var ErrNotFound = errors.New("not found")

// ErrChatTaken is returned when a chat id is already registered under another folder.
var ErrChatTaken = errors.New("chat already registered")

//go:embed migrations/*.sql
var migrationFS embed.FS

// readPoolSize bounds concurrent readers; reads are short, a few suffice.
const readPoolSize = 4

// Store is the clawpen database. It is safe for concurrent use.
type Store struct {
	w *sql.DB // the single writer connection
	r *sql.DB // the read pool (query-only in SQLite)
	// pg is true for PostgreSQL, false for SQLite.
	pg bool
	// where names the database in errors: the file, or the PostgreSQL
	// host and database (never the password).
	where string
	// url is CLAWPEN_DATABASE_URL, password included (pg_dump needs it);
	// "" for SQLite.
	url string
	// queued receives a value when outbox rows were committed (see
	// OutboxQueued).
	queued chan struct{}
}

// Open opens (creating if needed) the SQLite database at path and applies
// pending migrations. The parent directory is created with mode 0700 and
// the file is kept at mode 0600: it holds message contents.
func Open(ctx context.Context, path string) (*Store, error) {
	if path == "" {
		return nil, errors.New("open store: empty path")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	if err := prepareFile(abs); err != nil {
		return nil, fmt.Errorf("open store %s: %w", abs, err)
	}

	w, err := sql.Open("sqlite3", dsn(abs, url.Values{
		"_journal_mode": {"WAL"},
		"_busy_timeout": {"5000"},
		"_txlock":       {"immediate"},
		"_foreign_keys": {"on"},
		"_synchronous":  {"NORMAL"},
	}))
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", abs, err)
	}
	singleWriter(w)
	s := &Store{w: w, where: abs, queued: make(chan struct{}, 1)}
	if err := migrateFresh(ctx, s); err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("open store %s: %w", abs, err)
	}

	// Opened after the writer switched the file to WAL (a persistent setting),
	// so readers never need to write the header.
	s.r, err = sql.Open("sqlite3", dsn(abs, url.Values{
		"_busy_timeout": {"5000"},
		"_foreign_keys": {"on"},
		"_query_only":   {"true"},
	}))
	if err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("open store %s: %w", abs, err)
	}
	return s.openReader(ctx)
}

// OpenPostgres connects to the PostgreSQL database at url
// (CLAWPEN_DATABASE_URL, postgres://user:password@host/db?...) and applies
// pending migrations. The database must exist; the user must be allowed to
// create tables in it.
func OpenPostgres(ctx context.Context, url string) (*Store, error) {
	cfg, err := ParsePostgresURL(url)
	if err != nil {
		return nil, err
	}
	name := where(cfg)
	w := stdlib.OpenDB(*cfg)
	singleWriter(w)
	s := &Store{w: w, pg: true, where: name, url: url, queued: make(chan struct{}, 1)}
	if err := migrate(ctx, s); err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("open store %s: %w", name, err)
	}
	s.r = stdlib.OpenDB(*cfg)
	return s.openReader(ctx)
}

// ParsePostgresURL reads CLAWPEN_DATABASE_URL. pgx's errors name the URL
// with its password hidden.
func ParsePostgresURL(url string) (*pgx.ConnConfig, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("CLAWPEN_DATABASE_URL: %w", err)
	}
	return cfg, nil
}

// where names a PostgreSQL database for messages: user, host and database,
// never the password.
func where(cfg *pgx.ConnConfig) string {
	return fmt.Sprintf("PostgreSQL %s@%s:%d/%s", cfg.User, cfg.Host, cfg.Port, cfg.Database)
}

// Where names the database: "SQLite <file>", or "PostgreSQL
// user@host:port/database" (never the password).
func (s *Store) Where() string {
	if s.pg {
		return s.where
	}
	return "SQLite " + s.where
}

// singleWriter makes db one connection that stays open: the store's writer.
func singleWriter(db *sql.DB) {
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
}

// openReader sizes the read pool s.r, checks that it connects and returns s.
func (s *Store) openReader(ctx context.Context) (*Store, error) {
	s.r.SetMaxOpenConns(readPoolSize)
	s.r.SetMaxIdleConns(readPoolSize)
	if err := s.r.PingContext(ctx); err != nil {
		_ = s.r.Close()
		_ = s.w.Close()
		return nil, fmt.Errorf("open store %s: reader: %w", s.where, err)
	}
	return s, nil
}

// Close closes both pools.
func (s *Store) Close() error {
	return errors.Join(s.r.Close(), s.w.Close())
}

// dsn builds a file: URI so that any character in the path is escaped and
// cannot be mistaken for a query parameter.
func dsn(abs string, params url.Values) string {
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs), RawQuery: params.Encode()}
	// url.URL renders "file:///abs"; SQLite accepts an empty authority.
	return u.String()
}

// prepareFile creates the parent directory (0700) and the database file
// (0600) before SQLite does, so the file is never briefly world-readable,
// and tightens the mode of an existing file.
func prepareFile(abs string) error {
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return fmt.Errorf("create directory: %w", err)
	}
	f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("create database file: %w", err)
	}
	st, err := f.Stat()
	if err == nil && st.Mode().Perm() != 0o600 {
		err = f.Chmod(0o600)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("database file mode: %w", err)
	}
	return nil
}

type migration struct {
	version int
	name    string
	sql     string
}

// Dialect suffixes of migration files: NNNN_name.sql is one migration for
// both databases; where their SQL differs, NNNN_name.sqlite.sql and
// NNNN_name.postgres.sql are its two forms, under the same number.
const (
	sqliteSuffix   = ".sqlite.sql"
	postgresSuffix = ".postgres.sql"
)

// loadMigrations reads migrations/ and returns the migrations of one
// database (pg: PostgreSQL's forms), sorted. It checks both lists: the
// versions run 1, 2, 3 ... without gaps, and each has exactly one file for
// each database (a shared one, or both forms), so a migration written for
// one database alone fails here, for either.
func loadMigrations(pg bool) ([]migration, error) {
	entries, err := fs.ReadDir(migrationFS, "migrations")
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	lists := map[bool][]migration{}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".sql") {
			continue
		}
		num, _, ok := strings.Cut(name, "_")
		if !ok {
			return nil, fmt.Errorf("migration %s: name must be NNNN_name.sql", name)
		}
		v, err := strconv.Atoi(num)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: bad version number", name)
		}
		body, err := fs.ReadFile(migrationFS, "migrations/"+name)
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", name, err)
		}
		m := migration{version: v, name: name, sql: string(body)}
		for _, forPG := range []bool{false, true} {
			other := sqliteSuffix
			if !forPG {
				other = postgresSuffix
			}
			if !strings.HasSuffix(name, other) {
				lists[forPG] = append(lists[forPG], m)
			}
		}
	}
	for _, forPG := range []bool{false, true} {
		ms := lists[forPG]
		sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
		for i, m := range ms {
			if m.version != i+1 {
				return nil, fmt.Errorf("migration %s: expected version %d: each version needs one file for both databases "+
					"(NNNN_name.sql) or one for each (NNNN_name%s and NNNN_name%s)", m.name, i+1, sqliteSuffix, postgresSuffix)
			}
		}
	}
	return lists[pg], nil
}

// migrateFresh is migrate, tried again while SQLite answers "busy" at once:
// processes opening a new file together race to switch it to WAL, and the
// loser's first statement may fail without waiting for the busy timeout.
func migrateFresh(ctx context.Context, s *Store) error {
	for try := 0; ; try++ {
		err := migrate(ctx, s)
		var se sqlite3.Error
		if err == nil || try == 50 || !errors.As(err, &se) || (se.Code != sqlite3.ErrBusy && se.Code != sqlite3.ErrLocked) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// migrate applies every migration newer than the database's schema
// version, each in its own transaction that also records the new version.
// The version is read again inside the transaction, after a lock only
// migrations take, so two processes opening a new database at once apply
// each migration exactly once.
func migrate(ctx context.Context, s *Store) error {
	ms, err := loadMigrations(s.pg)
	if err != nil {
		return err
	}
	current, err := s.SchemaVersion(ctx)
	if err != nil {
		return err
	}
	if current > len(ms) {
		return fmt.Errorf("database schema version %d is newer than this program's %d", current, len(ms))
	}
	for _, m := range ms[current:] {
		if err := s.applyMigration(ctx, m); err != nil {
			return err
		}
	}
	return nil
}

// migrationsTable records PostgreSQL's schema version, one row per
// migration applied (SQLite keeps it in PRAGMA user_version).
const migrationsTable = `CREATE TABLE IF NOT EXISTS clawpen_migrations (
	version BIGINT PRIMARY KEY,
	name    TEXT   NOT NULL,
	applied BIGINT NOT NULL)`

// migrationLock is the key of the transaction-level advisory lock that
// migrations of a PostgreSQL database take (Lead's is another).
const migrationLock = 0x636c6177_00000001

// SchemaVersion is the number of the last migration applied to the
// database (0: none).
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	return schemaVersion(ctx, s.w, s.pg)
}

type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func schemaVersion(ctx context.Context, q queryer, pg bool) (int, error) {
	query := `PRAGMA user_version`
	if pg {
		// A new database has no table yet: version 0.
		var exists bool
		if err := q.QueryRowContext(ctx, `SELECT to_regclass('clawpen_migrations') IS NOT NULL`).Scan(&exists); err != nil {
			return 0, fmt.Errorf("read schema version: %w", err)
		}
		if !exists {
			return 0, nil
		}
		query = `SELECT COALESCE(MAX(version), 0) FROM clawpen_migrations`
	}
	var v int
	if err := q.QueryRowContext(ctx, query).Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}

func (s *Store) applyMigration(ctx context.Context, m migration) error {
	return withTx(ctx, s.w, func(tx *sql.Tx) error {
		if s.pg {
			// Held until the transaction ends; the table is made under it,
			// since two CREATE TABLE IF NOT EXISTS at once can collide.
			if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrationLock)); err != nil {
				return fmt.Errorf("lock migrations: %w", err)
			}
			if _, err := tx.ExecContext(ctx, migrationsTable); err != nil {
				return fmt.Errorf("schema version table: %w", err)
			}
		}
		current, err := schemaVersion(ctx, tx, s.pg)
		if err != nil {
			return err
		}
		if current >= m.version {
			return nil // another process got here first
		}
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			return fmt.Errorf("apply migration %s: %w", m.name, err)
		}
		if s.pg {
			_, err = tx.ExecContext(ctx, `INSERT INTO clawpen_migrations (version, name, applied) VALUES ($1, $2, $3)`,
				m.version, m.name, time.Now().UnixMilli())
		} else {
			// PRAGMA takes no bound parameters; the version is an int we parsed.
			_, err = tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", m.version))
		}
		if err != nil {
			return fmt.Errorf("set schema version %d: %w", m.version, err)
		}
		return nil
	})
}

// withTx runs fn in a transaction on db (BEGIN IMMEDIATE on the writer) and
// commits if fn succeeds.
func withTx(ctx context.Context, db *sql.DB, fn func(tx *sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// millis is t in unix milliseconds; the zero time is 0.
func millis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// nullMillis is like millis but maps the zero time to NULL, for columns
// where "no time" must drop out of range queries and MIN().
func nullMillis(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMilli()
}

// asStored is t as it reads back from the database: UTC, whole milliseconds.
func asStored(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return time.UnixMilli(t.UnixMilli()).UTC()
}

// timeCol scans an INTEGER millisecond column (NULL or 0 = zero time) into a
// UTC time.Time.
type timeCol struct{ dst *time.Time }

func (c timeCol) Scan(v any) error {
	switch x := v.(type) {
	case nil:
		*c.dst = time.Time{}
	case int64:
		if x == 0 {
			*c.dst = time.Time{}
		} else {
			*c.dst = time.UnixMilli(x).UTC()
		}
	default:
		return fmt.Errorf("time column holds %T, want integer", v)
	}
	return nil
}

// limitArg maps "no limit" (<= 0) to the largest LIMIT both databases
// take (SQLite's -1 is an error in PostgreSQL).
func limitArg(limit int) int64 {
	if limit <= 0 {
		return math.MaxInt64
	}
	return int64(limit)
}

// boolInt stores a bool as 0/1.
func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
