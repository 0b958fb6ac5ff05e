package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// Writable reports whether the database takes a write now, on the store's
// writer, writing nothing. SQLite: it takes the write lock (BEGIN
// IMMEDIATE) and rolls back; a store whose disk is gone, or locked by
// another writer beyond the busy timeout, fails. PostgreSQL: it takes the
// row-exclusive lock a write takes on router_state and rolls back; a
// server that is gone, a read-only standby or a read-only session fails.
func (s *Store) Writable(ctx context.Context) error {
	tx, err := s.w.BeginTx(ctx, nil) // SQLite's _txlock=immediate: BEGIN IMMEDIATE
	if err == nil && s.pg {
		_, err = tx.ExecContext(ctx, `LOCK TABLE router_state IN ROW EXCLUSIVE MODE`)
		err = errors.Join(err, tx.Rollback())
	} else if err == nil {
		err = tx.Rollback()
	}
	if err != nil {
		return fmt.Errorf("database not writable: %w", err)
	}
	return nil
}

// Backup writes a consistent copy of the database to dst, a new file (an
// existing one is never overwritten), mode 0600, and checks it; a copy that
// fails is removed. SQLite: through the online backup API, one step copying
// every page inside one read transaction, so the copy is the database as of
// one moment, and in WAL mode the host's writer is never blocked meanwhile;
// checked with PRAGMA integrity_check. PostgreSQL: see backupPostgres.
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
	if s.pg {
		err = s.backupPostgres(ctx, abs)
	} else if err = s.backupTo(ctx, abs); err == nil {
		err = IntegrityCheck(ctx, abs)
	}
	if err != nil {
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

// backupPostgres writes the database to abs (made empty, 0600) with the
// distribution's pg_dump in its custom format, one snapshot (pg_dump's
// own: a repeatable-read transaction, so the host keeps writing), then
// reads it back with pg_restore --list. There is no in-process way to
// copy a PostgreSQL database whole; without pg_dump the backup is refused
// with what to install. The password travels in pg_dump's environment,
// never on its command line, where other users' `ps` would show it.
func (s *Store) backupPostgres(ctx context.Context, abs string) error {
	dump, err := exec.LookPath("pg_dump")
	if err != nil {
		return errors.New("a PostgreSQL database is backed up with pg_dump, which is not installed: " +
			"apt-get install postgresql-client (of the server's major version or newer), or back it up with your own pg_dump")
	}
	conn, password, err := splitPassword(s.url)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(abs, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	env := os.Environ()
	if password != "" {
		env = append(env, "PGPASSWORD="+password)
	}
	var stderr strings.Builder
	cmd := exec.CommandContext(ctx, dump, "--format=custom", "--no-owner", "--dbname="+conn)
	cmd.Env, cmd.Stdout, cmd.Stderr = env, f, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("pg_dump: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	if err := f.Sync(); err != nil {
		return err
	}
	restore := filepath.Join(filepath.Dir(dump), "pg_restore")
	if _, err := exec.LookPath(restore); err != nil {
		restore = "pg_restore"
	}
	if out, err := exec.CommandContext(ctx, restore, "--list", abs).CombinedOutput(); err != nil {
		return fmt.Errorf("check the dump with pg_restore --list: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// splitPassword is the postgres:// URL u without its password (in the
// user part or a password= parameter), and the password.
func splitPassword(u string) (conn, password string, err error) {
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "postgres" && p.Scheme != "postgresql") {
		return "", "", errors.New("CLAWPEN_DATABASE_URL: want a postgres:// URL")
	}
	if p.User != nil {
		password, _ = p.User.Password()
		p.User = url.User(p.User.Username())
	}
	q := p.Query()
	if v := q.Get("password"); v != "" {
		password = v
		q.Del("password")
		p.RawQuery = q.Encode()
	}
	return p.String(), password, nil
}
