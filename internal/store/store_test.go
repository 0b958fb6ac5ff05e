package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
)

func TestOpenMigratesOnceAndReopens(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		ctx := context.Background()
		ms, err := loadMigrations(db.pg)
		require.NoError(t, err)
		require.NotEmpty(t, ms)

		s, where := db.openTest(t)
		v, err := s.SchemaVersion(ctx)
		require.NoError(t, err)
		assert.Equal(t, len(ms), v)
		require.NoError(t, s.SetState(ctx, "k", "v"))
		require.NoError(t, s.Close())

		// A second open must not re-apply 0001 (CREATE TABLE would fail) and must keep data.
		for range 2 {
			s2, err := db.open(ctx, where)
			require.NoError(t, err)
			v, err := s2.SchemaVersion(ctx)
			require.NoError(t, err)
			assert.Equal(t, len(ms), v)
			v2, ok, err := s2.State(ctx, "k")
			require.NoError(t, err)
			assert.True(t, ok)
			assert.Equal(t, "v", v2)
			if !db.pg {
				var mode string
				require.NoError(t, s2.w.QueryRow("PRAGMA journal_mode").Scan(&mode))
				assert.Equal(t, "wal", mode)
			}
			require.NoError(t, s2.Close())
		}
	})
}

// Each version has a file for each database, and where the two differ
// their forms sit side by side under one number.
func TestMigrationsHaveBothForms(t *testing.T) {
	lite, err := loadMigrations(false)
	require.NoError(t, err)
	pg, err := loadMigrations(true)
	require.NoError(t, err)
	require.Equal(t, len(lite), len(pg))
	for i := range lite {
		a, b := lite[i].name, pg[i].name
		if a == b {
			continue // one file for both
		}
		assert.Equal(t, strings.TrimSuffix(a, sqliteSuffix), strings.TrimSuffix(b, postgresSuffix), "two forms of one migration")
	}
}

// PostgreSQL's INTEGER is 32 bits; Telegram's chat ids and millisecond
// times are not. A migration that says INTEGER where SQLite means 64 bits
// fails here.
func TestPostgresIntegersAreWide(t *testing.T) {
	s, _ := postgresDB.openTest(t)
	rows, err := s.r.Query(`SELECT table_name, column_name FROM information_schema.columns
		WHERE table_schema = current_schema() AND data_type IN ('integer', 'smallint')`)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var table, col string
		require.NoError(t, rows.Scan(&table, &col))
		t.Errorf("%s.%s is a narrow integer: make it BIGINT", table, col)
	}
	require.NoError(t, rows.Err())
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		ctx := context.Background()
		s, where := db.openTest(t)
		setSchemaVersion(t, s, 999)
		require.NoError(t, s.Close())

		_, err := db.open(ctx, where)
		require.ErrorContains(t, err, "newer")
	})
}

// Hosts opening a new database at once apply each migration once.
func TestOpenConcurrentFresh(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		ctx := context.Background()
		where := db.fresh(t)
		const n = 4
		var wg sync.WaitGroup
		errs := make([]error, n)
		stores := make([]*Store, n)
		for i := range n {
			wg.Go(func() { stores[i], errs[i] = db.open(ctx, where) })
		}
		wg.Wait()
		for i := range n {
			require.NoError(t, errs[i])
			require.NoError(t, stores[i].Close())
		}
	})
}

// A database from before the unused schema was dropped opens with its
// messages intact and without the sessions table and the from_bot column.
func TestMigrationDropsUnusedSchema(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		ctx := context.Background()
		ms, err := loadMigrations(db.pg)
		require.NoError(t, err)
		drop := slices.IndexFunc(ms, func(m migration) bool { return strings.HasSuffix(m.name, "_drop_unused.sql") })
		require.Positive(t, drop, "the migration that drops the unused schema")

		where := db.fresh(t)
		old := &Store{pg: db.pg}
		if db.pg {
			cfg, err := ParsePostgresURL(where)
			require.NoError(t, err)
			old.w = stdlib.OpenDB(*cfg)
		} else {
			require.NoError(t, prepareFile(where))
			old.w, err = sql.Open("sqlite3", dsn(where, nil))
			require.NoError(t, err)
		}
		for _, m := range ms[:drop] {
			require.NoError(t, old.applyMigration(ctx, m))
		}
		_, err = old.w.Exec(`INSERT INTO messages (chat_id, message_id, text, from_bot, triggered) VALUES (-5, 1, 'hi', 1, 1)`)
		require.NoError(t, err)
		_, err = old.w.Exec(`INSERT INTO sessions (folder, session_id) VALUES ('team', 's1')`)
		require.NoError(t, err)
		require.NoError(t, old.w.Close())

		s, err := db.open(ctx, where)
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		v, err := s.SchemaVersion(ctx)
		require.NoError(t, err)
		assert.Equal(t, len(ms), v)
		msgs, err := s.MessagesAfter(ctx, -5, 0, 0)
		require.NoError(t, err)
		require.Len(t, msgs, 1)
		assert.Equal(t, "hi", msgs[0].Text)
		assert.True(t, msgs[0].Triggered)
		table, column := `SELECT count(*) FROM sqlite_schema WHERE name = 'sessions'`,
			`SELECT count(*) FROM pragma_table_info('messages') WHERE name = 'from_bot'`
		if db.pg {
			table, column = `SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = 'sessions'`,
				`SELECT count(*) FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = 'messages' AND column_name = 'from_bot'`
		}
		var n int
		require.NoError(t, s.r.QueryRow(table).Scan(&n))
		assert.Zero(t, n, "sessions table")
		require.NoError(t, s.r.QueryRow(column).Scan(&n))
		assert.Zero(t, n, "from_bot column")
	})
}

// SQLite alone from here: its file.

func TestFileModes(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "a", "b")
	path := filepath.Join(dir, "clawpen.db")
	s, err := Open(ctx, path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.NoError(t, s.SetState(ctx, "k", "v")) // makes sure the WAL exists

	st, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), st.Mode().Perm(), "parent dir")
	for _, name := range []string{path, path + "-wal", path + "-shm"} {
		st, err := os.Stat(name)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), st.Mode().Perm(), name)
	}
}

func TestOpenTightensExistingFileMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "clawpen.db")
	require.NoError(t, os.WriteFile(path, nil, 0o644))
	require.NoError(t, os.Chmod(path, 0o644)) // umask-proof
	s, err := Open(context.Background(), path)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	st, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())
}

func TestOpenOddPath(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "we?ird #dir&x=1", "my db%20.sqlite")
	s, err := Open(ctx, path)
	require.NoError(t, err)
	require.NoError(t, s.SetState(ctx, "k", "v"))
	require.NoError(t, s.Close())
	_, err = os.Stat(path)
	require.NoError(t, err, "the file must be created at the literal path")
}

func TestOpenErrors(t *testing.T) {
	_, err := Open(context.Background(), "")
	require.Error(t, err)

	// Parent is a regular file: the directory cannot be created.
	f := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(f, nil, 0o600))
	_, err = Open(context.Background(), filepath.Join(f, "x.db"))
	require.Error(t, err)
}

func TestChats(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		ctx := context.Background()
		s, _ := db.openTest(t)
		t0 := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)

		require.NoError(t, s.UpsertChat(ctx, domain.Chat{ID: -100, Title: "Old", Type: "group", LastSeen: t0}))
		require.NoError(t, s.UpsertChat(ctx, domain.Chat{ID: 42, Title: "Alice", Type: "private", LastSeen: t0.Add(time.Minute)}))
		// Update: new title, empty type keeps the old one, last_seen moves.
		require.NoError(t, s.UpsertChat(ctx, domain.Chat{ID: -100, Title: "New", LastSeen: t0.Add(time.Hour)}))
		require.Error(t, s.UpsertChat(ctx, domain.Chat{ID: 0}))

		chats, err := s.ListChats(ctx)
		require.NoError(t, err)
		assert.Equal(t, []domain.Chat{
			{ID: -100, Title: "New", Type: "group", LastSeen: t0.Add(time.Hour)},
			{ID: 42, Title: "Alice", Type: "private", LastSeen: t0.Add(time.Minute)},
		}, chats)

		// Zero LastSeen means now.
		require.NoError(t, s.UpsertChat(ctx, domain.Chat{ID: 7, Type: "private"}))
		chats, err = s.ListChats(ctx)
		require.NoError(t, err)
		assert.Equal(t, int64(7), chats[0].ID)
		assert.WithinDuration(t, time.Now(), chats[0].LastSeen, time.Hour)
	})
}

func TestAddMessageDedupe(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		ctx := context.Background()
		s, _ := db.openTest(t)
		tm := time.Date(2025, 3, 4, 5, 6, 7, 891_000_000, time.UTC)

		tests := []struct {
			name         string
			msg          domain.Message
			wantInserted bool
			wantSeqOf    int // index of the earlier step whose seq must be returned; -1 = new
		}{
			{"first", domain.Message{ChatID: 1, MessageID: 10, Text: "a", Time: tm}, true, -1},
			{"same chat other id", domain.Message{ChatID: 1, MessageID: 11, Text: "b"}, true, -1},
			{"same id other chat", domain.Message{ChatID: 2, MessageID: 10, Text: "c"}, true, -1},
			{"duplicate of first", domain.Message{ChatID: 1, MessageID: 10, Text: "changed"}, false, 0},
			{"duplicate of third", domain.Message{ChatID: 2, MessageID: 10}, false, 2},
		}
		seqs := make([]int64, len(tests))
		var last int64
		for i, tc := range tests {
			seq, inserted, err := s.AddMessage(ctx, tc.msg)
			require.NoError(t, err, tc.name)
			assert.Equal(t, tc.wantInserted, inserted, tc.name)
			seqs[i] = seq
			if tc.wantSeqOf >= 0 {
				assert.Equal(t, seqs[tc.wantSeqOf], seq, tc.name)
			} else {
				assert.Greater(t, seq, last, "%s: seq must grow", tc.name)
				last = seq
			}
		}

		msgs, err := s.MessagesAfter(ctx, 1, 0, 0)
		require.NoError(t, err)
		require.Len(t, msgs, 2)
		assert.Equal(t, "a", msgs[0].Text, "a duplicate must not overwrite the stored message")
		assert.Equal(t, tm, msgs[0].Time)

		_, _, err = s.AddMessage(ctx, domain.Message{ChatID: 0, MessageID: 1})
		require.Error(t, err)
	})
}

func TestMessagesAfterAndCursor(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		ctx := context.Background()
		s, _ := db.openTest(t)
		const chat, other = int64(-1001), int64(-1002)
		base := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)

		var seqs []int64
		for i := range 5 {
			m := domain.Message{
				ChatID: chat, MessageID: int64(100 + i), ThreadID: i % 2, SenderID: 9, SenderName: "Bob <b>",
				Text: fmt.Sprintf("m%d", i), Time: base.Add(time.Duration(i) * time.Second),
			}
			seq, _, err := s.AddMessage(ctx, m)
			require.NoError(t, err)
			seqs = append(seqs, seq)
			// Interleave another chat so seqs of one chat are not contiguous.
			_, _, err = s.AddMessage(ctx, domain.Message{ChatID: other, MessageID: int64(i), Text: "x"})
			require.NoError(t, err)
		}

		got, err := s.MessagesAfter(ctx, chat, 0, 0)
		require.NoError(t, err)
		require.Len(t, got, 5)
		for i, m := range got {
			assert.Equal(t, seqs[i], m.Seq)
			assert.Equal(t, fmt.Sprintf("m%d", i), m.Text)
			assert.Equal(t, chat, m.ChatID)
			assert.Equal(t, i%2, m.ThreadID)
			assert.Equal(t, "Bob <b>", m.SenderName)
			assert.Equal(t, base.Add(time.Duration(i)*time.Second), m.Time)
		}

		tests := []struct {
			name     string
			after    int64
			limit    int
			wantText []string
		}{
			{"from cursor", seqs[1], 0, []string{"m2", "m3", "m4"}},
			{"limit", seqs[1], 2, []string{"m2", "m3"}},
			{"at end", seqs[4], 0, nil},
			{"cursor between chat seqs", seqs[2] + 1, 0, []string{"m3", "m4"}},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				got, err := s.MessagesAfter(ctx, chat, tc.after, tc.limit)
				require.NoError(t, err)
				var texts []string
				for _, m := range got {
					texts = append(texts, m.Text)
				}
				assert.Equal(t, tc.wantText, texts)
			})
		}

		n, err := s.CountMessages(ctx, chat)
		require.NoError(t, err)
		assert.Equal(t, 5, n)
		n, err = s.CountMessages(ctx, 12345)
		require.NoError(t, err)
		assert.Zero(t, n)
	})
}

func TestCompleteRun(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		ctx := context.Background()
		s, _ := db.openTest(t)

		c, err := s.Cursor(ctx, "team")
		require.NoError(t, err)
		assert.Zero(t, c)

		created := time.Date(2025, 1, 2, 3, 4, 5, 6_000_000, time.UTC)
		out, err := s.CompleteRun(ctx, "team", 10, []domain.Outgoing{
			{ChatID: -5, Text: "hello"},
			{ChatID: -5, ThreadID: 3, Text: "world", Created: created},
		})
		require.NoError(t, err)
		require.Len(t, out, 2)
		assert.NotZero(t, out[0].ID)
		assert.Greater(t, out[1].ID, out[0].ID)
		assert.False(t, out[0].Created.IsZero(), "Created defaults to now")
		assert.Equal(t, created, out[1].Created)

		pending, err := s.PendingOutbox(ctx)
		require.NoError(t, err)
		assert.Equal(t, out, pending)

		// Per chat: only that chat's rows, in order.
		other, err := s.CompleteRun(ctx, "team", 10, []domain.Outgoing{{ChatID: -6, Text: "elsewhere"}})
		require.NoError(t, err)
		mine, err := s.PendingOutboxOf(ctx, -5)
		require.NoError(t, err)
		assert.Equal(t, out, mine)
		theirs, err := s.PendingOutboxOf(ctx, -6)
		require.NoError(t, err)
		assert.Equal(t, other, theirs)
		require.NoError(t, s.MarkSent(ctx, other[0].ID))

		steps := []struct {
			cursor int64
			want   int64
		}{
			{5, 10},  // never backward
			{10, 10}, // same
			{11, 11}, // forward
			{0, 11},
		}
		for _, st := range steps {
			_, err := s.CompleteRun(ctx, "team", st.cursor, nil)
			require.NoError(t, err)
			c, err := s.Cursor(ctx, "team")
			require.NoError(t, err)
			assert.Equal(t, st.want, c, "after CompleteRun(%d)", st.cursor)
		}
		c, err = s.Cursor(ctx, "other")
		require.NoError(t, err)
		assert.Zero(t, c, "cursors are per folder")

		require.NoError(t, s.MarkSent(ctx, out[0].ID))
		require.NoError(t, s.MarkSent(ctx, out[0].ID), "marking twice is harmless")
		pending, err = s.PendingOutbox(ctx)
		require.NoError(t, err)
		assert.Equal(t, out[1:], pending)

		_, err = s.CompleteRun(ctx, "", 1, nil)
		require.Error(t, err)
		_, err = s.CompleteRun(ctx, "team", 99, []domain.Outgoing{{ChatID: 0, Text: "x"}})
		require.Error(t, err)
		c, err = s.Cursor(ctx, "team")
		require.NoError(t, err)
		assert.Equal(t, int64(11), c, "a refused run must not move the cursor")
	})
}

func TestCompleteRunIsAtomic(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		ctx := context.Background()
		s, _ := db.openTest(t)
		_, err := s.CompleteRun(ctx, "team", 3, nil)
		require.NoError(t, err)

		// Make the second outbox insert fail inside the transaction.
		boom := `CREATE TRIGGER boom BEFORE INSERT ON outbox WHEN NEW.text = 'boom'
			BEGIN SELECT RAISE(ABORT, 'boom'); END`
		if db.pg {
			boom = `CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'boom'; END $$;
				CREATE TRIGGER boom BEFORE INSERT ON outbox FOR EACH ROW WHEN (NEW.text = 'boom') EXECUTE FUNCTION boom()`
		}
		_, err = s.w.Exec(boom)
		require.NoError(t, err)

		_, err = s.CompleteRun(ctx, "team", 50, []domain.Outgoing{{ChatID: 1, Text: "ok"}, {ChatID: 1, Text: "boom"}})
		require.ErrorContains(t, err, "boom")

		c, err := s.Cursor(ctx, "team")
		require.NoError(t, err)
		assert.Equal(t, int64(3), c, "cursor must roll back with the outbox")
		pending, err := s.PendingOutbox(ctx)
		require.NoError(t, err)
		assert.Empty(t, pending, "the first row must roll back too")
	})
}

func TestGroups(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		ctx := context.Background()
		s, _ := db.openTest(t)
		added := time.Date(2024, 12, 24, 18, 0, 0, 0, time.UTC)

		main := domain.Group{ChatID: 42, Name: "Owner", Folder: domain.MainFolder, Added: added}
		team := domain.Group{
			ChatID: -100, Name: "Team", Folder: "team", Trigger: "@Andy", Profile: "strict",
			Mounts: []domain.MountRequest{{HostPath: "~/projects", ContainerPath: "projects", ReadOnly: true}},
			Policy: json.RawMessage(`{"allow":[1,2]}`), Added: added,
		}
		require.NoError(t, s.PutGroup(ctx, main))
		require.NoError(t, s.PutGroup(ctx, team))

		g, ok, err := s.GroupByChat(ctx, -100)
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, team, g)
		g, ok, err = s.GroupByFolder(ctx, domain.MainFolder)
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, main, g)
		assert.Nil(t, g.Mounts)
		assert.Nil(t, g.Policy)

		_, ok, err = s.GroupByChat(ctx, 999)
		require.NoError(t, err)
		assert.False(t, ok)
		_, ok, err = s.GroupByFolder(ctx, "nope")
		require.NoError(t, err)
		assert.False(t, ok)

		// Replace by folder: new chat id and name; zero Added keeps the old one.
		team2 := domain.Group{ChatID: -200, Name: "Team 2", Folder: "team"}
		require.NoError(t, s.PutGroup(ctx, team2))
		g, ok, err = s.GroupByFolder(ctx, "team")
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, int64(-200), g.ChatID)
		assert.Equal(t, "Team 2", g.Name)
		assert.Equal(t, added, g.Added)
		assert.Nil(t, g.Mounts)
		_, ok, err = s.GroupByChat(ctx, -100)
		require.NoError(t, err)
		assert.False(t, ok, "the old chat id is free after the replace")

		list, err := s.ListGroups(ctx)
		require.NoError(t, err)
		require.Len(t, list, 2)
		assert.Equal(t, "main", list[0].Folder)
		assert.Equal(t, "team", list[1].Folder)

		bad := []struct {
			name string
			g    domain.Group
			is   error
		}{
			{"chat under another folder", domain.Group{ChatID: -200, Folder: "other"}, ErrChatTaken},
			{"main chat under another folder", domain.Group{ChatID: 42, Folder: "other"}, ErrChatTaken},
			{"path traversal folder", domain.Group{ChatID: 5, Folder: "../x"}, nil},
			{"reserved global", domain.Group{ChatID: 5, Folder: domain.GlobalFolder}, nil},
			{"empty folder", domain.Group{ChatID: 5}, nil},
			{"zero chat", domain.Group{Folder: "zero"}, nil},
		}
		for _, tc := range bad {
			t.Run(tc.name, func(t *testing.T) {
				err := s.PutGroup(ctx, tc.g)
				require.Error(t, err)
				if tc.is != nil {
					require.ErrorIs(t, err, tc.is)
				}
			})
		}
		list, err = s.ListGroups(ctx)
		require.NoError(t, err)
		assert.Len(t, list, 2, "refused puts change nothing")

		deleted, err := s.DeleteGroup(ctx, "team")
		require.NoError(t, err)
		assert.True(t, deleted)
		deleted, err = s.DeleteGroup(ctx, "team")
		require.NoError(t, err)
		assert.False(t, deleted)
		require.NoError(t, s.PutGroup(ctx, domain.Group{ChatID: -200, Folder: "other"}), "chat id free after delete")
	})
}

func TestGroupMalformedMountsFailsClosed(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		ctx := context.Background()
		s, _ := db.openTest(t)
		require.NoError(t, s.PutGroup(ctx, domain.Group{ChatID: 1, Folder: "x"}))
		_, err := s.w.Exec(`UPDATE "groups" SET mounts = '{broken' WHERE folder = 'x'`)
		require.NoError(t, err)
		_, _, err = s.GroupByFolder(ctx, "x")
		require.Error(t, err)
		_, err = s.ListGroups(ctx)
		require.Error(t, err)
	})
}

func TestRekeyChat(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		ctx := context.Background()
		s, _ := db.openTest(t)
		const oldID, newID = int64(-400), int64(-1000000000400)
		seen := time.Date(2025, 2, 2, 0, 0, 0, 0, time.UTC)

		require.NoError(t, s.UpsertChat(ctx, domain.Chat{ID: oldID, Title: "Family", Type: "group", LastSeen: seen}))
		require.NoError(t, s.PutGroup(ctx, domain.Group{ChatID: oldID, Name: "Family", Folder: "family"}))
		for i := range 3 {
			_, _, err := s.AddMessage(ctx, domain.Message{ChatID: oldID, MessageID: int64(i + 1), Text: fmt.Sprint(i)})
			require.NoError(t, err)
		}
		before, err := s.MessagesAfter(ctx, oldID, 0, 0)
		require.NoError(t, err)
		out, err := s.CompleteRun(ctx, "family", 2, []domain.Outgoing{{ChatID: oldID, Text: "pending"}})
		require.NoError(t, err)
		task, err := s.CreateTask(ctx, domain.Task{Group: "family", ChatID: oldID, Prompt: "p", ScheduleType: "interval", ScheduleValue: "1h"})
		require.NoError(t, err)
		// Unrelated rows must stay.
		require.NoError(t, s.PutGroup(ctx, domain.Group{ChatID: 7, Folder: "bystander"}))
		_, _, err = s.AddMessage(ctx, domain.Message{ChatID: 7, MessageID: 1})
		require.NoError(t, err)

		require.NoError(t, s.RekeyChat(ctx, oldID, newID))

		g, ok, err := s.GroupByChat(ctx, newID)
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, "family", g.Folder)
		_, ok, err = s.GroupByChat(ctx, oldID)
		require.NoError(t, err)
		assert.False(t, ok)

		chats, err := s.ListChats(ctx)
		require.NoError(t, err)
		require.Len(t, chats, 1)
		assert.Equal(t, domain.Chat{ID: newID, Title: "Family", Type: "group", LastSeen: seen}, chats[0])

		n, err := s.CountMessages(ctx, oldID)
		require.NoError(t, err)
		assert.Zero(t, n)
		n, err = s.CountMessages(ctx, newID)
		require.NoError(t, err)
		assert.Equal(t, 3, n)
		after, err := s.MessagesAfter(ctx, newID, 0, 0)
		require.NoError(t, err)
		require.Len(t, after, len(before))
		for i := range before {
			assert.Equal(t, before[i].Seq, after[i].Seq, "seqs are kept, so the cursor still applies")
		}
		c, err := s.Cursor(ctx, "family")
		require.NoError(t, err)
		assert.Equal(t, int64(2), c)

		pending, err := s.PendingOutbox(ctx)
		require.NoError(t, err)
		require.Len(t, pending, 1)
		assert.Equal(t, out[0].ID, pending[0].ID)
		assert.Equal(t, newID, pending[0].ChatID)

		got, ok, err := s.Task(ctx, task.ID)
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, newID, got.ChatID)

		n, err = s.CountMessages(ctx, 7)
		require.NoError(t, err)
		assert.Equal(t, 1, n)

		// Rekeying onto a chat registered under another folder changes nothing.
		err = s.RekeyChat(ctx, newID, 7)
		require.ErrorIs(t, err, ErrChatTaken)
		n, err = s.CountMessages(ctx, newID)
		require.NoError(t, err)
		assert.Equal(t, 3, n)

		require.NoError(t, s.RekeyChat(ctx, newID, newID), "same id is a no-op")
		require.Error(t, s.RekeyChat(ctx, 0, newID))
	})
}

func TestRekeyChatMergesExistingTarget(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		ctx := context.Background()
		s, _ := db.openTest(t)
		t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
		require.NoError(t, s.UpsertChat(ctx, domain.Chat{ID: -1, Title: "Old", Type: "group", LastSeen: t0}))
		require.NoError(t, s.UpsertChat(ctx, domain.Chat{ID: -2, Title: "New", Type: "supergroup", LastSeen: t0.Add(time.Hour)}))
		_, _, err := s.AddMessage(ctx, domain.Message{ChatID: -1, MessageID: 1, Text: "old one"})
		require.NoError(t, err)
		_, _, err = s.AddMessage(ctx, domain.Message{ChatID: -1, MessageID: 2, Text: "old two"})
		require.NoError(t, err)
		_, _, err = s.AddMessage(ctx, domain.Message{ChatID: -2, MessageID: 1, Text: "new one"})
		require.NoError(t, err)

		require.NoError(t, s.RekeyChat(ctx, -1, -2))

		chats, err := s.ListChats(ctx)
		require.NoError(t, err)
		assert.Equal(t, []domain.Chat{{ID: -2, Title: "New", Type: "supergroup", LastSeen: t0.Add(time.Hour)}}, chats)
		msgs, err := s.MessagesAfter(ctx, -2, 0, 0)
		require.NoError(t, err)
		var texts []string
		for _, m := range msgs {
			texts = append(texts, m.Text)
		}
		assert.ElementsMatch(t, []string{"new one", "old one", "old two"}, texts, "history and new messages live side by side")
		n, err := s.CountMessages(ctx, -1)
		require.NoError(t, err)
		assert.Zero(t, n)

		// The supergroup numbers its messages anew: its message 2 is new, not a
		// duplicate of the old group's message 2.
		_, inserted, err := s.AddMessage(ctx, domain.Message{ChatID: -2, MessageID: 2, Text: "new two"})
		require.NoError(t, err)
		assert.True(t, inserted)
	})
}

// A history id whose negated form is taken, in the new chat or by the old
// chat's own negative id, stays behind under the old chat: the migration
// neither fails nor loses a message.
func TestRekeyChatKeepsTakenIDs(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		ctx := context.Background()
		s, _ := db.openTest(t)
		for _, m := range []domain.Message{
			{ChatID: -1, MessageID: 3, Text: "old 3"},
			{ChatID: -1, MessageID: -3, Text: "old -3"},
			{ChatID: -1, MessageID: 5, Text: "old 5"},
			{ChatID: -2, MessageID: -5, Text: "new -5"},
		} {
			_, _, err := s.AddMessage(ctx, m)
			require.NoError(t, err)
		}
		require.NoError(t, s.RekeyChat(ctx, -1, -2))

		texts := func(chat int64) []string {
			ms, err := s.MessagesAfter(ctx, chat, 0, 0)
			require.NoError(t, err)
			var out []string
			for _, m := range ms {
				out = append(out, m.Text)
			}
			return out
		}
		moved, left := texts(-2), texts(-1)
		assert.Len(t, moved, 2, "moved: %v", moved)
		assert.Contains(t, moved, "new -5")
		assert.Len(t, left, 2, "left behind: %v", left)
		assert.Contains(t, left, "old 5", "its -5 is the new chat's")
		assert.ElementsMatch(t, []string{"new -5", "old 3", "old -3", "old 5"}, append(moved, left...), "nothing lost")
	})
}

func TestState(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		ctx := context.Background()
		s, _ := db.openTest(t)

		_, ok, err := s.State(ctx, "telegram.offset")
		require.NoError(t, err)
		assert.False(t, ok)
		require.NoError(t, s.SetState(ctx, "telegram.offset", "10"))
		require.NoError(t, s.SetState(ctx, "telegram.offset", "11"))
		require.NoError(t, s.SetState(ctx, "owner", ""))
		v, ok, err := s.State(ctx, "telegram.offset")
		require.NoError(t, err)
		assert.True(t, ok)
		assert.Equal(t, "11", v)
		v, ok, err = s.State(ctx, "owner")
		require.NoError(t, err)
		assert.True(t, ok, "an empty value is still a value")
		assert.Empty(t, v)
		require.Error(t, s.SetState(ctx, "", "x"))

	})
}

func TestTasks(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		ctx := context.Background()
		s, _ := db.openTest(t)
		now := time.Date(2025, 5, 5, 12, 0, 0, 0, time.UTC)

		mk := func(group string, next time.Time) domain.Task {
			t.Helper()
			task, err := s.CreateTask(ctx, domain.Task{
				Group: group, ChatID: -1, Prompt: "do " + group, ScheduleType: domain.ScheduleCron,
				ScheduleValue: "0 * * * *", NextRun: next,
			})
			require.NoError(t, err)
			return task
		}
		past := mk("team", now.Add(-time.Hour))
		exact := mk("team", now)
		future := mk("main", now.Add(time.Hour))
		unscheduled := mk("main", time.Time{})
		paused := mk("team", now.Add(-2*time.Hour))
		require.NoError(t, s.SetTaskStatus(ctx, paused.ID, domain.TaskPaused))

		assert.Equal(t, domain.ContextGroup, past.ContextMode)
		assert.Equal(t, domain.TaskActive, past.Status)
		assert.False(t, past.Created.IsZero())
		got, ok, err := s.Task(ctx, past.ID)
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, past, got, "the returned task equals the stored one")
		_, ok, err = s.Task(ctx, 9999)
		require.NoError(t, err)
		assert.False(t, ok)

		ids := func(ts []domain.Task) []int64 {
			var out []int64
			for _, t := range ts {
				out = append(out, t.ID)
			}
			return out
		}
		due, err := s.DueTasks(ctx, now)
		require.NoError(t, err)
		assert.Equal(t, []int64{past.ID, exact.ID}, ids(due), "active, next_run <= now, earliest first")

		next, ok, err := s.NextDue(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, past.NextRun, next, "paused and unscheduled tasks do not count")

		all, err := s.ListTasks(ctx, "")
		require.NoError(t, err)
		assert.Equal(t, []int64{past.ID, exact.ID, future.ID, unscheduled.ID, paused.ID}, ids(all))
		mine, err := s.ListTasks(ctx, "main")
		require.NoError(t, err)
		assert.Equal(t, []int64{future.ID, unscheduled.ID}, ids(mine))

		// Ran: next run moves on, last run recorded; zero lastRun keeps it.
		ran := now.Add(time.Second)
		require.NoError(t, s.SetTaskNextRun(ctx, past.ID, now.Add(2*time.Hour), ran))
		require.NoError(t, s.SetTaskNextRun(ctx, past.ID, now.Add(3*time.Hour), time.Time{}))
		got, _, err = s.Task(ctx, past.ID)
		require.NoError(t, err)
		assert.Equal(t, now.Add(3*time.Hour), got.NextRun)
		assert.Equal(t, ran, got.LastRun)
		// A finished once-task: no next run.
		require.NoError(t, s.SetTaskNextRun(ctx, exact.ID, time.Time{}, ran))
		require.NoError(t, s.SetTaskStatus(ctx, future.ID, domain.TaskCancelled))

		due, err = s.DueTasks(ctx, now)
		require.NoError(t, err)
		assert.Empty(t, due)
		next, ok, err = s.NextDue(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, now.Add(3*time.Hour), next)

		require.NoError(t, s.SetTaskStatus(ctx, past.ID, domain.TaskPaused))
		_, ok, err = s.NextDue(ctx)
		require.NoError(t, err)
		assert.False(t, ok, "no active scheduled task")

		require.ErrorIs(t, s.SetTaskStatus(ctx, 9999, domain.TaskPaused), ErrNotFound)
		require.ErrorIs(t, s.SetTaskNextRun(ctx, 9999, now, now), ErrNotFound)
		require.Error(t, s.SetTaskStatus(ctx, past.ID, "bogus"))
	})
}

func TestCreateTaskValidation(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		ctx := context.Background()
		s, _ := db.openTest(t)
		ok := domain.Task{Group: "g", Prompt: "p", ScheduleType: domain.ScheduleOnce, ScheduleValue: "2025-01-01T00:00:00Z"}
		tests := []struct {
			name   string
			modify func(*domain.Task)
		}{
			{"no group", func(t *domain.Task) { t.Group = "" }},
			{"no prompt", func(t *domain.Task) { t.Prompt = "" }},
			{"bad schedule type", func(t *domain.Task) { t.ScheduleType = "weekly" }},
			{"bad context mode", func(t *domain.Task) { t.ContextMode = "shared" }},
			{"bad status", func(t *domain.Task) { t.Status = "running" }},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				task := ok
				tc.modify(&task)
				_, err := s.CreateTask(ctx, task)
				require.Error(t, err)
			})
		}
		created, err := s.CreateTask(ctx, ok)
		require.NoError(t, err)
		all, err := s.ListTasks(ctx, "")
		require.NoError(t, err)
		assert.Equal(t, []domain.Task{created}, all, "only the valid task is stored")
	})
}

// The cap counts a group's active and paused tasks, holds under concurrent
// creations, and leaves other groups alone.
func TestCreateTaskCapped(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		ctx := context.Background()
		s, _ := db.openTest(t)
		task := func(group string) domain.Task {
			return domain.Task{Group: group, Prompt: "p", ScheduleType: domain.ScheduleInterval, ScheduleValue: "1h"}
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		stored := 0
		for range 20 {
			wg.Go(func() {
				_, ok, err := s.CreateTaskCapped(ctx, task("g"), 5)
				assert.NoError(t, err)
				if ok {
					mu.Lock()
					stored++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		assert.Equal(t, 5, stored)
		live, err := s.ListTasks(ctx, "g")
		require.NoError(t, err)
		assert.Len(t, live, 5)

		ts, err := s.ListTasks(ctx, "g")
		require.NoError(t, err)
		require.NoError(t, s.SetTaskStatus(ctx, ts[0].ID, domain.TaskPaused))
		_, ok, err := s.CreateTaskCapped(ctx, task("g"), 5)
		require.NoError(t, err)
		assert.False(t, ok, "a paused task still counts")
		require.NoError(t, s.SetTaskStatus(ctx, ts[1].ID, domain.TaskCancelled))
		_, ok, err = s.CreateTaskCapped(ctx, task("g"), 5)
		require.NoError(t, err)
		assert.True(t, ok, "a cancelled one does not")
		_, ok, err = s.CreateTaskCapped(ctx, task("other"), 5)
		require.NoError(t, err)
		assert.True(t, ok, "another group has its own cap")
		_, _, err = s.CreateTaskCapped(ctx, domain.Task{Group: "other"}, 5)
		assert.Error(t, err, "validation as in CreateTask")
	})
}

func TestTaskRuns(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		ctx := context.Background()
		s, _ := db.openTest(t)
		task, err := s.CreateTask(ctx, domain.Task{Group: "g", Prompt: "p", ScheduleType: "interval", ScheduleValue: "30m"})
		require.NoError(t, err)
		start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

		var ids []int64
		for i := range 3 {
			id, err := s.AddTaskRun(ctx, domain.TaskRun{
				TaskID: task.ID, Started: start.Add(time.Duration(i) * time.Minute),
				Duration: 1500 * time.Millisecond, Status: "ok", Result: fmt.Sprint("r", i),
			})
			require.NoError(t, err)
			ids = append(ids, id)
		}
		_, err = s.AddTaskRun(ctx, domain.TaskRun{TaskID: task.ID + 100, Status: "ok"})
		require.Error(t, err, "foreign key: no such task")
		_, err = s.AddTaskRun(ctx, domain.TaskRun{TaskID: task.ID})
		require.Error(t, err, "status is required")

		runs, err := s.TaskRuns(ctx, task.ID, 2)
		require.NoError(t, err)
		require.Len(t, runs, 2)
		assert.Equal(t, domain.TaskRun{
			ID: ids[2], TaskID: task.ID, Started: start.Add(2 * time.Minute),
			Duration: 1500 * time.Millisecond, Status: "ok", Result: "r2",
		}, runs[0])
		assert.Equal(t, ids[1], runs[1].ID)
		runs, err = s.TaskRuns(ctx, task.ID, 0)
		require.NoError(t, err)
		assert.Len(t, runs, 3)
	})
}

func TestAudit(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		ctx := context.Background()
		s, _ := db.openTest(t)
		at := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
		require.NoError(t, s.Audit(ctx, domain.AuditEntry{Time: at, Group: "team", Operation: "ipc.send_message", Target: "chat -100", Decision: "deny", Reason: "other chat"}))
		require.NoError(t, s.Audit(ctx, domain.AuditEntry{Operation: "sandbox.start", Decision: "allow"}))
		require.Error(t, s.Audit(ctx, domain.AuditEntry{Decision: "allow"}))

		log, err := s.AuditLog(ctx, 0)
		require.NoError(t, err)
		require.Len(t, log, 2)
		assert.Equal(t, "sandbox.start", log[0].Operation, "newest first")
		assert.WithinDuration(t, time.Now(), log[0].Time, time.Hour, "time defaults to now")
		assert.Equal(t, domain.AuditEntry{ID: log[1].ID, Time: at, Group: "team", Operation: "ipc.send_message", Target: "chat -100", Decision: "deny", Reason: "other chat"}, log[1])

		log, err = s.AuditLog(ctx, 1)
		require.NoError(t, err)
		assert.Len(t, log, 1)
	})
}

// Two *Store on one file stand in for `serve` and the CLI in two processes:
// every write must wait on the busy timeout, never fail with "database is locked".
func TestTwoStoresWriteConcurrently(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		ctx := context.Background()
		a, path := db.openTest(t)
		b, err := db.open(ctx, path)
		require.NoError(t, err)
		t.Cleanup(func() { _ = b.Close() })

		const workers, perWorker = 4, 50
		var wg sync.WaitGroup
		errs := make(chan error, 2*workers*perWorker*3)
		for si, s := range []*Store{a, b} {
			for w := range workers {
				wg.Go(func() {
					for i := range perWorker {
						id := int64(si*1_000_000 + w*1_000 + i)
						if _, _, err := s.AddMessage(ctx, domain.Message{ChatID: 1, MessageID: id, Text: "x"}); err != nil {
							errs <- err
						}
						if _, err := s.CompleteRun(ctx, "main", id, []domain.Outgoing{{ChatID: 1, Text: "y"}}); err != nil {
							errs <- err
						}
						if err := s.SetState(ctx, fmt.Sprint("k", si, w), fmt.Sprint(i)); err != nil {
							errs <- err
						}
						if _, err := s.PendingOutbox(ctx); err != nil {
							errs <- err
						}
					}
				})
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}

		n, err := a.CountMessages(ctx, 1)
		require.NoError(t, err)
		assert.Equal(t, 2*workers*perWorker, n)
		pending, err := b.PendingOutbox(ctx)
		require.NoError(t, err)
		assert.Len(t, pending, 2*workers*perWorker)
		c, err := a.Cursor(ctx, "main")
		require.NoError(t, err)
		assert.Equal(t, int64(1_000_000+(workers-1)*1_000+perWorker-1), c, "the highest cursor wins")
	})
}

func BenchmarkAddMessage(b *testing.B) {
	for _, db := range testDBs {
		b.Run(db.name, func(b *testing.B) {
			s, _ := db.openTest(b)
			ctx := context.Background()
			var id int64
			for b.Loop() {
				id++
				if _, _, err := s.AddMessage(ctx, domain.Message{
					ChatID: -100, MessageID: id, SenderID: 1, SenderName: "bench", Text: "hello there", Time: time.Now(),
				}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(id)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

func TestTriggeredRoundTripsAndEnqueue(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		s, _ := db.openTest(t)
		ctx := context.Background()
		_, _, err := s.AddMessage(ctx, domain.Message{ChatID: -5, MessageID: 1, Text: "context"})
		require.NoError(t, err)
		_, _, err = s.AddMessage(ctx, domain.Message{ChatID: -5, MessageID: 2, Text: "@Andy go", Triggered: true})
		require.NoError(t, err)
		msgs, err := s.MessagesAfter(ctx, -5, 0, 0)
		require.NoError(t, err)
		require.Len(t, msgs, 2)
		assert.False(t, msgs[0].Triggered)
		assert.True(t, msgs[1].Triggered)

		q, err := s.Enqueue(ctx, []domain.Outgoing{{ChatID: -5, Text: "notice"}})
		require.NoError(t, err)
		require.Len(t, q, 1)
		pending, err := s.PendingOutbox(ctx)
		require.NoError(t, err)
		require.Len(t, pending, 1)
		assert.Equal(t, "notice", pending[0].Text)
		_, err = s.Enqueue(ctx, []domain.Outgoing{{ChatID: 0, Text: "x"}})
		assert.Error(t, err)
	})
}

func TestUpdateTask(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		s, _ := db.openTest(t)
		ctx := context.Background()
		created, err := s.CreateTask(ctx, domain.Task{Group: "main", ChatID: 1, Prompt: "a", ScheduleType: "interval", ScheduleValue: "1h"})
		require.NoError(t, err)
		next := time.Now().Add(time.Hour).Truncate(time.Millisecond)
		created.Prompt, created.ScheduleType, created.ScheduleValue, created.NextRun = "b", "cron", "0 9 * * *", next
		require.NoError(t, s.UpdateTask(ctx, created))
		got, ok, err := s.Task(ctx, created.ID)
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, "b", got.Prompt)
		assert.Equal(t, "cron", got.ScheduleType)
		assert.True(t, next.Equal(got.NextRun))
		assert.ErrorIs(t, s.UpdateTask(ctx, domain.Task{ID: 999, Prompt: "x", ScheduleType: "once", ContextMode: "group"}), ErrNotFound)
		assert.Error(t, s.UpdateTask(ctx, domain.Task{ID: created.ID, Prompt: "x", ScheduleType: "weekly", ContextMode: "group"}))
	})
}

func TestFoldersWithUnanswered(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		ctx := context.Background()
		s, _ := db.openTest(t)
		add := func(chat, id int64, triggered bool) int64 {
			seq, _, err := s.AddMessage(ctx, domain.Message{ChatID: chat, MessageID: id, Text: "m", Time: time.Now(), Triggered: triggered})
			require.NoError(t, err)
			return seq
		}
		for i, folder := range []string{"answered", "chatter", "fresh", "waiting"} {
			require.NoError(t, s.PutGroup(ctx, domain.Group{ChatID: -int64(i + 1), Name: folder, Folder: folder}))
		}
		// answered (-1): its triggered message is at or before the cursor.
		seq := add(-1, 1, true)
		add(-1, 2, false)
		_, err := s.CompleteRun(ctx, "answered", seq, nil)
		require.NoError(t, err)
		// chatter (-2): only untriggered messages after the cursor.
		add(-2, 1, false)
		// fresh (-3): a triggered message and no cursor yet.
		add(-3, 1, true)
		// waiting (-4): answered once, triggered again since.
		seq = add(-4, 1, true)
		_, err = s.CompleteRun(ctx, "waiting", seq, nil)
		require.NoError(t, err)
		add(-4, 2, true)
		// An unregistered chat's triggered message names no folder.
		add(-99, 1, true)

		got, err := s.FoldersWithUnanswered(ctx)
		require.NoError(t, err)
		assert.Equal(t, []string{"fresh", "waiting"}, got)
	})
}

func TestClaimCommandOnce(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		s, _ := db.openTest(t)
		ctx := context.Background()
		first, err := s.ClaimCommand(ctx, 42, 7)
		require.NoError(t, err)
		assert.True(t, first)
		first, err = s.ClaimCommand(ctx, 42, 7)
		require.NoError(t, err)
		assert.False(t, first, "the same message again is not a new command")
		first, err = s.ClaimCommand(ctx, 43, 7)
		require.NoError(t, err)
		assert.True(t, first, "message ids are per chat")
	})
}

// Delivery learns of rows from the store: every commit that queues a row
// says so (Enqueue, CompleteRun), one that queues nothing does not, and
// wakes that pile up while nobody listens are one.
func TestOutboxQueuedSaysWhenRowsWereQueued(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		s, _ := db.openTest(t)
		ctx := t.Context()
		queued := func() bool {
			select {
			case <-s.OutboxQueued():
				return true
			default:
				return false
			}
		}
		require.False(t, queued(), "nothing queued yet")

		_, err := s.Enqueue(ctx, []domain.Outgoing{{ChatID: 1, Text: "a"}})
		require.NoError(t, err)
		_, err = s.Enqueue(ctx, []domain.Outgoing{{ChatID: 1, Text: "b"}})
		require.NoError(t, err)
		assert.True(t, queued(), "Enqueue says so")
		assert.False(t, queued(), "two commits nobody heard yet are one wake")

		_, err = s.CompleteRun(ctx, "main", 1, nil)
		require.NoError(t, err)
		assert.False(t, queued(), "a run that queues nothing wakes nobody")
		_, err = s.CompleteRun(ctx, "main", 2, []domain.Outgoing{{ChatID: 1, Text: "answer"}})
		require.NoError(t, err)
		assert.True(t, queued(), "CompleteRun says so")

		_, err = s.Enqueue(ctx, []domain.Outgoing{{ChatID: 0, Text: "refused"}})
		require.Error(t, err)
		assert.False(t, queued(), "nor does a refused one")
	})
}

func TestSetGroupProfile(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		ctx := context.Background()
		s, _ := db.openTest(t)
		team := domain.Group{ChatID: -100, Name: "Team", Folder: "team", Trigger: "@Andy", Policy: json.RawMessage(`{"allow":[1]}`)}
		require.NoError(t, s.PutGroup(ctx, team))

		require.NoError(t, s.SetGroupProfile(ctx, "team", "research"))
		g, ok, err := s.GroupByFolder(ctx, "team")
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, "research", g.Profile)
		assert.Equal(t, "@Andy", g.Trigger, "nothing else changes")
		assert.JSONEq(t, `{"allow":[1]}`, string(g.Policy))

		require.NoError(t, s.SetGroupProfile(ctx, "team", ""))
		g, _, err = s.GroupByFolder(ctx, "team")
		require.NoError(t, err)
		assert.Equal(t, domain.DefaultProfile, g.ProfileName())

		err = s.SetGroupProfile(ctx, "nobody", "research")
		assert.ErrorIs(t, err, ErrNotFound)
	})
}
