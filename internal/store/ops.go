package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/mattn/go-sqlite3"
)

// OutboxStats is the number of undelivered outgoing messages and when the
// oldest of them was queued (zero when there is none).
func (s *Store) OutboxStats(ctx context.Context) (n int, oldest time.Time, err error) {
	var created sql.NullInt64
	if err := s.r.QueryRowContext(ctx, `SELECT count(*), min(created) FROM outbox`).Scan(&n, &created); err != nil {
		return 0, time.Time{}, fmt.Errorf("outbox stats: %w", err)
	}
	if created.Valid && created.Int64 > 0 {
		oldest = time.UnixMilli(created.Int64)
	}
	return n, oldest, nil
}

// Writable reports whether the database takes a write now: it takes the
// write lock (BEGIN IMMEDIATE) and rolls back, writing nothing. A store
// whose disk is gone, or locked by another writer beyond the busy timeout,
// fails.
func (s *Store) Writable(ctx context.Context) error {
	tx, err := s.w.BeginTx(ctx, nil) // _txlock=immediate: BEGIN IMMEDIATE
	if err != nil {
		return fmt.Errorf("database not writable: %w", err)
	}
	return tx.Rollback()
}

// Backup writes a consistent copy of the database to dst, which must not
// exist, through SQLite's online backup API: one step copies every page
// inside one read transaction, so the copy is the database as of one
// moment, and in WAL mode the host's writer is never blocked meanwhile.
// The copy is checked with PRAGMA integrity_check before Backup returns.
func (s *Store) Backup(ctx context.Context, dst string) error {
	abs, err := filepath.Abs(dst)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	// O_EXCL: never overwrite a file, the last good backup least of all.
	f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("backup: %s exists; name a new file", abs)
	}
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	_ = f.Close()
	ok := false
	defer func() {
		if !ok {
			_ = os.Remove(abs)
		}
	}()
	if err := s.backupTo(ctx, abs); err != nil {
		return fmt.Errorf("backup to %s: %w", abs, err)
	}
	if err := IntegrityCheck(ctx, abs); err != nil {
		return fmt.Errorf("backup to %s: %w", abs, err)
	}
	ok = true
	return nil
}

func (s *Store) backupTo(ctx context.Context, abs string) error {
	// The copy keeps a rollback journal: a single file, which is what a
	// backup should be; serve switches it to WAL when it opens it.
	ddb, err := sql.Open("sqlite3", dsn(abs, url.Values{"_journal_mode": {"DELETE"}}))
	if err != nil {
		return err
	}
	defer ddb.Close()
	dconn, err := ddb.Conn(ctx)
	if err != nil {
		return err
	}
	defer dconn.Close()
	sconn, err := s.r.Conn(ctx)
	if err != nil {
		return err
	}
	defer sconn.Close()
	return dconn.Raw(func(d any) error {
		return sconn.Raw(func(src any) error {
			dc, ok1 := d.(*sqlite3.SQLiteConn)
			sc, ok2 := src.(*sqlite3.SQLiteConn)
			if !ok1 || !ok2 {
				return errors.New("not a go-sqlite3 connection")
			}
			b, err := dc.Backup("main", sc, "main")
			if err != nil {
				return err
			}
			done, err := b.Step(-1)
			if ferr := b.Finish(); err == nil {
				err = ferr
			}
			if err == nil && !done {
				err = errors.New("backup did not complete")
			}
			return err
		})
	})
}

// IntegrityCheck opens the database file at path read-only and runs
// PRAGMA integrity_check.
func IntegrityCheck(ctx context.Context, path string) error {
	db, err := sql.Open("sqlite3", dsn(path, url.Values{"mode": {"ro"}}))
	if err != nil {
		return err
	}
	defer db.Close()
	var res string
	if err := db.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&res); err != nil {
		return fmt.Errorf("integrity check: %w", err)
	}
	if res != "ok" {
		return fmt.Errorf("integrity check: %s", res)
	}
	return nil
}
