package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/store"
	"github.com/clawpen/clawpen/internal/store/pgtest"
)

// storeCompare puts the store on SQLite and on PostgreSQL side by side:
// messages per second through the real router (1 in 4 triggered), one
// Handle's latency, and the database work of one agent run as the router
// and its delivery do it. PostgreSQL is a server of the distribution's
// started for the run on this machine (unix socket, fsync on), measured
// as it ships (every commit waits for its WAL to reach the disk) and with
// synchronous_commit off for clawpen's sessions, which is as durable as
// SQLite in WAL mode with synchronous=NORMAL, as the store opens it (a
// power cut may undo the last commits; nothing is ever half written).
// Without PostgreSQL installed its rows say so.
func storeCompare(ctx context.Context, o Options) Section {
	sec := Section{Name: "store"}
	groups, stored, n := 200, 20_000, 5_000
	if o.Quick {
		stored, n = 2_000, 500
	}
	srv, pgErr := pgtest.Start(ctx, pgtest.Options{Durable: true})
	if pgErr == nil {
		defer srv.Stop()
	}
	postgres := func(params string) func(ctx context.Context) (*store.Store, error) {
		return func(ctx context.Context) (*store.Store, error) {
			url, err := srv.NewDatabase(ctx)
			if err != nil {
				return nil, err
			}
			return store.OpenPostgres(ctx, url+params)
		}
	}
	for _, db := range []struct {
		name string
		open func(ctx context.Context) (*store.Store, error) // nil: SQLite
		err  error                                           // why it cannot run
	}{
		{name: "SQLite"},
		{name: "PostgreSQL", err: pgErr, open: postgres("")},
		{name: "PostgreSQL, synchronous_commit off", err: pgErr, open: postgres("&synchronous_commit=off")},
	} {
		names := []string{"router, mixed (1 in 4 triggered), " + db.name, "router, one Handle, " + db.name, "a run's database work, " + db.name}
		if db.err != nil {
			for _, name := range names {
				sec.Rows = append(sec.Rows, Row{Name: name, Skipped: db.err.Error()})
			}
			continue
		}
		o.progress("bench: store: router on %s with %s groups and %s stored messages", db.name, count(groups), count(stored))
		rows, err := storeRows(ctx, o, names, groups, stored, n, db.open)
		if err != nil {
			return failed(sec, fmt.Errorf("%s: %w", db.name, err))
		}
		if db.open != nil {
			for i := range rows {
				rows[i].RatioTo = sec.Rows[i].Name // SQLite's row of the same figure
			}
		}
		sec.Rows = append(sec.Rows, rows...)
	}
	sec.Notes = append(sec.Notes, fmt.Sprintf("router rows: %s messages through router.Handle (the router is not run); "+
		"a run's database work: the group, its cursor, the messages after it, CompleteRun (cursor and answer, one transaction), "+
		"the chat's outbox and MarkSent, as one run and its delivery do them, %d runs, each after one new message", count(n), o.runs()))
	return sec
}

// storeRows measures one database: the router's rate and latency, then
// runs' database work.
func storeRows(ctx context.Context, o Options, names []string, groups, stored, n int, open func(ctx context.Context) (*store.Store, error)) ([]Row, error) {
	rb, err := newRouterBench(ctx, groups, stored, open)
	if err != nil {
		return nil, err
	}
	defer rb.Close()
	rate, lat, err := rb.measure(ctx, n, 4)
	if err != nil {
		return nil, err
	}
	work := make([]time.Duration, 0, o.runs())
	for i := range o.runs() {
		g := i % groups
		rb.nextID[g]++
		if _, _, err := rb.st.AddMessage(ctx, domain.Message{ChatID: groupChat(g), MessageID: rb.nextID[g], SenderID: memberID,
			SenderName: "member", Text: "@Andy one more", Time: time.Now(), Triggered: true}); err != nil {
			return nil, err
		}
		begin := time.Now()
		if err := runWork(ctx, rb.st, groupFolder(g)); err != nil {
			return nil, err
		}
		work = append(work, time.Since(begin))
	}
	return []Row{Value(names[0], "msgs/s", rate), Latency(names[1], lat), Latency(names[2], work)}, nil
}

// runWork is the database work of one run of folder's agent and of its
// answer's delivery, in the router's order.
func runWork(ctx context.Context, st *store.Store, folder string) error {
	g, ok, err := st.GroupByFolder(ctx, folder)
	if err != nil || !ok {
		return errors.Join(err, fmt.Errorf("group %s missing", folder))
	}
	cursor, err := st.Cursor(ctx, folder)
	if err != nil {
		return err
	}
	msgs, err := st.MessagesAfter(ctx, g.ChatID, cursor, 100_000)
	if err != nil {
		return err
	}
	if len(msgs) == 0 {
		return fmt.Errorf("group %s: nothing to answer", folder)
	}
	if _, err := st.CompleteRun(ctx, folder, msgs[len(msgs)-1].Seq, []domain.Outgoing{{ChatID: g.ChatID, Text: "the answer"}}); err != nil {
		return err
	}
	rows, err := st.PendingOutboxOf(ctx, g.ChatID)
	if err != nil {
		return err
	}
	for _, r := range rows {
		if err := st.MarkSent(ctx, r.ID); err != nil {
			return err
		}
	}
	return nil
}
