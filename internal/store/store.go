// Package store is clawpen's SQLite persistence: chats, messages, groups,
// cursors, tasks, the outbox, handled commands, router state and the audit log.
//
// One *sql.DB with a single connection does all writes (SQLite allows one
// writer anyway; queuing in Go is cheaper than spinning on SQLITE_BUSY), and a
// second, query-only pool serves reads, which WAL lets run beside the writer.
// Explicit transactions are BEGIN IMMEDIATE, so a second process (the CLI
// while `serve` runs) waits on the busy timeout instead of failing with
// "database is locked" on a read-to-write upgrade.
package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

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
	r *sql.DB // query-only read pool
	// queued receives a value when outbox rows were committed (see
	// OutboxQueued).
	queued chan struct{}
}

// Open opens (creating if needed) the database at path and applies pending
// migrations. The parent directory is created with mode 0700 and the file
// is kept at mode 0600: it holds message contents.
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
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)

	if err := migrateFresh(ctx, w); err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("open store %s: %w", abs, err)
	}

	// Opened after the writer switched the file to WAL (a persistent setting),
	// so readers never need to write the header.
	r, err := sql.Open("sqlite3", dsn(abs, url.Values{
		"_busy_timeout": {"5000"},
		"_foreign_keys": {"on"},
		"_query_only":   {"true"},
	}))
	if err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("open store %s: %w", abs, err)
	}
	r.SetMaxOpenConns(readPoolSize)
	r.SetMaxIdleConns(readPoolSize)
	if err := r.PingContext(ctx); err != nil {
		_ = r.Close()
		_ = w.Close()
		return nil, fmt.Errorf("open store %s: reader: %w", abs, err)
	}
	return &Store{w: w, r: r, queued: make(chan struct{}, 1)}, nil
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

// loadMigrations reads migrations/NNNN_name.sql, sorted, and checks that the
// versions run 1, 2, 3 ... without gaps or duplicates.
func loadMigrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFS, "migrations")
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var ms []migration
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
		ms = append(ms, migration{version: v, name: name, sql: string(body)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i, m := range ms {
		if m.version != i+1 {
			return nil, fmt.Errorf("migration %s: expected version %d", m.name, i+1)
		}
	}
	return ms, nil
}

// migrate applies every migration newer than PRAGMA user_version, each in
// its own immediate transaction that also bumps user_version. The version is
// re-read inside the transaction, so two processes opening a fresh file at
// once apply each migration exactly once.
// migrateFresh is migrate, tried again while SQLite answers "busy" at once:
// processes opening a new file together race to switch it to WAL, and the
// loser's first statement may fail without waiting for the busy timeout.
func migrateFresh(ctx context.Context, db *sql.DB) error {
	for try := 0; ; try++ {
		err := migrate(ctx, db)
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

func migrate(ctx context.Context, db *sql.DB) error {
	ms, err := loadMigrations()
	if err != nil {
		return err
	}
	var current int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&current); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if current > len(ms) {
		return fmt.Errorf("database schema version %d is newer than this program's %d", current, len(ms))
	}
	for _, m := range ms[current:] {
		if err := applyMigration(ctx, db, m); err != nil {
			return err
		}
	}
	return nil
}

func applyMigration(ctx context.Context, db *sql.DB, m migration) error {
	return withTx(ctx, db, func(tx *sql.Tx) error {
		var current int
		if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&current); err != nil {
			return fmt.Errorf("read schema version: %w", err)
		}
		if current >= m.version {
			return nil // another process got here first
		}
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			return fmt.Errorf("apply migration %s: %w", m.name, err)
		}
		// PRAGMA takes no bound parameters; the version is an int we parsed.
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", m.version)); err != nil {
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

// limitArg maps "no limit" (<= 0) to SQLite's -1.
func limitArg(limit int) int {
	if limit <= 0 {
		return -1
	}
	return limit
}

// boolInt stores a bool as 0/1.
func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
