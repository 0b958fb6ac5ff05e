package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The serving lock of a PostgreSQL database: a session advisory lock, two
// int4 keys (pg_locks shows them as classid and objid, objsubid 2). It is
// per database, so two deployments on one server do not meet.
const (
	leadKey1 = 0x636c6177 // "claw"
	leadKey2 = 1
)

// How the lock is held. A standby tries for it every leadRetry. The holder
// checks every leadCheckEvery that its connection still holds it, each
// check bounded by leadCheckTimeout: a holder cut off from the database
// knows within leadCheckEvery + leadCheckTimeout (4 s). The server frees the
// lock of a holder that went silent (its machine died) when its keepalives
// give up, tcp_keepalives_idle + interval × count = 5 + 2 × 3 = 11 s after
// the last packet: later than that, so a holder that is alive but cut off
// has stopped before a standby can take over.
const (
	leadRetry        = time.Second
	leadCheckEvery   = time.Second
	leadCheckTimeout = 3 * time.Second
)

// ErrLeadLost is why a host stops serving when its hold on the lock ends.
var ErrLeadLost = errors.New("lost the database's serving lock")

// Lead is this process's hold on the serving lock of a PostgreSQL
// database: one host serves a database at a time. It lives on a connection
// of its own, which the server closes when the process dies, freeing the
// lock at once for a standby.
type Lead struct {
	conn *pgx.Conn
	ctx  context.Context // good until the hold ends (Release, lost, or its parent ended)
	end  context.CancelCauseFunc
	done chan struct{} // closed when the keeper has returned
}

// TakeLead returns once this process holds the serving lock of the
// database at url. name is how the holder appears to others
// (application_name: who waits sees it, and doctor shows it). While
// another process holds it, waiting is called with who does, at the start
// and whenever that changes; the process holding nothing yet and running
// nothing, it tries again every second until ctx ends. A first connection
// that fails is returned (a wrong URL is an error, not a wait); later
// failures are waited out (the server restarts).
func TakeLead(ctx context.Context, url, name string, waiting func(holder string, err error)) (*Lead, error) {
	cfg, err := ParsePostgresURL(url)
	if err != nil {
		return nil, err
	}
	cfg.RuntimeParams["application_name"] = name
	cfg.RuntimeParams["tcp_keepalives_idle"] = "5"
	cfg.RuntimeParams["tcp_keepalives_interval"] = "2"
	cfg.RuntimeParams["tcp_keepalives_count"] = "3"

	var conn *pgx.Conn
	last, first := "", true
	for {
		if conn == nil {
			conn, err = pgx.ConnectConfig(ctx, cfg)
			if err != nil && first {
				return nil, fmt.Errorf("take the serving lock of %s: %w", where(cfg), err)
			}
		}
		first = false
		holder := ""
		if err == nil {
			var got bool
			err = conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, $2)`, leadKey1, leadKey2).Scan(&got)
			if err == nil && got {
				return keepLead(ctx, conn), nil
			}
			if err == nil {
				holder, err = leadHolder(ctx, conn)
			}
		}
		if err != nil && conn != nil {
			_ = conn.Close(context.WithoutCancel(ctx))
			conn = nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if now := fmt.Sprint(holder, err); now != last {
			waiting(holder, err)
			last = now
		}
		select {
		case <-ctx.Done():
			if conn != nil {
				_ = conn.Close(context.WithoutCancel(ctx))
			}
			return nil, ctx.Err()
		case <-time.After(leadRetry):
		}
	}
}

// keepLead starts the check that conn still holds the lock.
func keepLead(parent context.Context, conn *pgx.Conn) *Lead {
	ctx, end := context.WithCancelCause(parent)
	l := &Lead{conn: conn, ctx: ctx, end: end, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		tick := time.NewTicker(leadCheckEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			cctx, cancel := context.WithTimeout(ctx, leadCheckTimeout)
			var held bool
			err := conn.QueryRow(cctx, `SELECT EXISTS (SELECT 1 FROM pg_locks
				WHERE locktype = 'advisory' AND classid = $1::oid AND objid = $2::oid AND objsubid = 2
				  AND pid = pg_backend_pid() AND granted)`, leadKey1, leadKey2).Scan(&held)
			cancel()
			if ctx.Err() != nil {
				return // released
			}
			if err == nil && !held {
				err = errors.New("the lock is no longer held by this connection")
			}
			if err != nil {
				end(fmt.Errorf("%w: %w", ErrLeadLost, err))
				return
			}
		}
	}()
	return l
}

// Context ends when the hold does: at once when it is lost (its connection
// failed, or no longer holds the lock: another host may serve from then
// on, so whatever acts for the host must stop), on Release, or when the
// context TakeLead was given ends. Everything the host runs runs under it.
func (l *Lead) Context() context.Context { return l.ctx }

// Err is why the hold was lost (wrapping ErrLeadLost); nil while it holds,
// and after a Release.
func (l *Lead) Err() error {
	if err := context.Cause(l.ctx); errors.Is(err, ErrLeadLost) {
		return err
	}
	return nil
}

// Release gives the lock up (closing its connection ends the session,
// which frees it) and stops the check.
func (l *Lead) Release() {
	l.end(context.Canceled)
	<-l.done
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = l.conn.Close(ctx)
}

// LeadHolder says which session holds the serving lock of the database
// ("" when none does): its application_name (the holder's host and
// process), where it connects from and since when.
func (s *Store) LeadHolder(ctx context.Context) (string, error) {
	if !s.pg {
		return "", nil
	}
	conn, err := s.r.Conn(ctx)
	if err != nil {
		return "", fmt.Errorf("who holds the serving lock: %w", err)
	}
	defer conn.Close()
	var holder string
	err = conn.Raw(func(c any) error {
		pc, ok := c.(interface{ Conn() *pgx.Conn })
		if !ok {
			return errors.New("not a pgx connection")
		}
		holder, err = leadHolder(ctx, pc.Conn())
		return err
	})
	return holder, err
}

func leadHolder(ctx context.Context, conn *pgx.Conn) (string, error) {
	var (
		pid   int32
		name  string
		from  string
		since time.Time
	)
	err := conn.QueryRow(ctx, `SELECT l.pid, COALESCE(a.application_name, ''),
			COALESCE(host(a.client_addr), 'a local socket'), COALESCE(a.backend_start, now())
		FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE l.locktype = 'advisory' AND l.classid = $1::oid AND l.objid = $2::oid AND l.objsubid = 2 AND l.granted
		  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
		leadKey1, leadKey2).Scan(&pid, &name, &from, &since)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("who holds the serving lock: %w", err)
	}
	if name == "" {
		name = "an unnamed session"
	}
	return fmt.Sprintf("%s (server pid %d, from %s, since %s)", name, pid, from, since.UTC().Format(time.RFC3339)), nil
}
