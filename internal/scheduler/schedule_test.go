package scheduler

import (
	"testing"
	"time"
	_ "time/tzdata" // Europe/Berlin even where the system has no zoneinfo

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func berlin(t testing.TB) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	return loc
}

func TestParseScheduleErrors(t *testing.T) {
	loc := berlin(t)
	tests := []struct {
		name, typ, value string
		min              time.Duration
		wantErr          string
	}{
		{"unknown type", "weekly", "x", 0, `unknown schedule type "weekly"`},
		{"empty value", "cron", "  ", 0, "empty cron schedule"},
		{"six fields", "cron", "0 0 9 * * *", 0, "seconds are not supported"},
		{"four fields", "cron", "0 9 * *", 0, `cron "0 9 * *": want 5 fields`},
		{"bad minute", "cron", "61 9 * * *", 0, `cron "61 9 * * *"`},
		{"garbage", "cron", "a b c d e", 0, `cron "a b c d e"`},
		{"CRON_TZ", "cron", "CRON_TZ=UTC 0 9 * * *", 0, "host's time zone"},
		{"TZ without space", "cron", "TZ=UTC", 0, "host's time zone"},
		{"unknown descriptor", "cron", "@fortnightly", 0, `cron "@fortnightly"`},
		{"every below minimum", "cron", "@every 1m", 5 * time.Minute, "minimum of 5m0s"},
		{"every garbage", "cron", "@every soon", 0, `cron "@every soon"`},
		{"interval not duration", "interval", "30", 0, `interval "30": not a duration`},
		{"interval below minimum", "interval", "1m", 5 * time.Minute, "minimum of 5m0s"},
		{"interval below resolution", "interval", "500ms", 0, "minimum of 1s"},
		{"interval zero", "interval", "0s", 0, "minimum"},
		{"interval negative", "interval", "-1h", 0, "minimum"},
		{"interval too long", "interval", "8785h", 0, "maximum"},
		{"once no offset", "once", "2026-11-22T09:00:00", 0, `once "2026-11-22T09:00:00": not an RFC 3339`},
		{"once date only", "once", "2026-11-22", 0, "not an RFC 3339"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseSchedule(tt.typ, tt.value, loc, tt.min)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

func TestParseScheduleAccepts(t *testing.T) {
	loc := berlin(t)
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, loc) // a Saturday
	tests := []struct {
		name, typ, value string
		min              time.Duration
		wantFirst        time.Time
	}{
		{"five fields", "cron", "0 9 * * *", 0, time.Date(2026, 11, 22, 9, 0, 0, 0, loc)},
		{"names", "cron", "15 8 * * mon-fri", 0, time.Date(2026, 11, 23, 8, 15, 0, 0, loc)},
		{"surrounding space", "cron", "  */30 * * * *  ", 0, time.Date(2026, 11, 21, 12, 30, 0, 0, loc)},
		{"daily", "cron", "@daily", 0, time.Date(2026, 11, 22, 0, 0, 0, 0, loc)},
		{"hourly", "cron", "@hourly", 0, time.Date(2026, 11, 21, 13, 0, 0, 0, loc)},
		{"weekly", "cron", "@weekly", 0, time.Date(2026, 11, 22, 0, 0, 0, 0, loc)},
		{"monthly", "cron", "@monthly", 0, time.Date(2026, 12, 1, 0, 0, 0, 0, loc)},
		{"every at minimum", "cron", "@every 5m", 5 * time.Minute, now.Add(5 * time.Minute)},
		{"interval", "interval", "30m", 5 * time.Minute, now.Add(30 * time.Minute)},
		{"interval compound", "interval", "1h30m", 0, now.Add(90 * time.Minute)},
		{"interval max", "interval", "8784h", 0, now.Add(MaxInterval)},
		{"once zulu", "once", "2026-11-22T08:00:00Z", 0, time.Date(2026, 11, 22, 9, 0, 0, 0, loc)},
		{"once offset", "once", "2026-11-22T09:00:00+01:00", 0, time.Date(2026, 11, 22, 9, 0, 0, 0, loc)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ParseSchedule(tt.typ, tt.value, loc, tt.min)
			require.NoError(t, err)
			assert.Equal(t, tt.typ, s.Type)
			first, err := s.First(now)
			require.NoError(t, err)
			assert.True(t, tt.wantFirst.Equal(first), "first = %s, want %s", first.In(loc), tt.wantFirst)
		})
	}
}

func TestCronUsesGivenLocation(t *testing.T) {
	loc := berlin(t)
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	s, err := ParseSchedule("cron", "0 9 * * *", loc, 0)
	require.NoError(t, err)
	first, err := s.First(now)
	require.NoError(t, err)
	// 09:00 CEST is 07:00 UTC, whatever the process's time.Local is.
	assert.Equal(t, time.Date(2026, 6, 1, 7, 0, 0, 0, time.UTC), first.UTC())

	s, err = ParseSchedule("cron", "0 9 * * *", nil, 0)
	require.NoError(t, err)
	first, err = s.First(now)
	require.NoError(t, err)
	assert.Equal(t, time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC), first.UTC(), "nil location means UTC")
}

func TestOncePast(t *testing.T) {
	s, err := ParseSchedule("once", "2026-01-01T00:00:00Z", time.UTC, 0)
	require.NoError(t, err)
	for _, now := range []time.Time{
		time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), // exactly then: not in the future
		time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC),
	} {
		_, err = s.First(now)
		require.ErrorIs(t, err, ErrPast)
		assert.Contains(t, err.Error(), "once time 2026-01-01T00:00:00Z is in the past")
	}
	next, done := s.Next(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC))
	assert.True(t, done)
	assert.True(t, next.IsZero())
}

func TestCronNever(t *testing.T) {
	s, err := ParseSchedule("cron", "0 0 31 2 *", time.UTC, 0)
	require.NoError(t, err)
	_, err = s.First(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	require.ErrorIs(t, err, ErrNever)
	_, done := s.Next(time.Time{}, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	assert.True(t, done)
}

func TestZeroSpec(t *testing.T) {
	var s Schedule
	_, err := s.First(time.Now())
	require.Error(t, err)
	_, done := s.Next(time.Now(), time.Now())
	assert.True(t, done)
}

// TestCronDST walks daily schedules across Berlin's 2026 transitions
// (spring forward 2026-03-29 02:00 CET -> 03:00 CEST, fall back 2026-10-25
// 03:00 CEST -> 02:00 CET), each run happening one second after it was due.
func TestCronDST(t *testing.T) {
	loc := berlin(t)
	d := func(mo time.Month, day, h, m int) time.Time { return time.Date(2026, mo, day, h, m, 0, 0, loc) }
	tests := []struct {
		name, value string
		start       time.Time
		want        []time.Time
	}{
		{
			name:  "09:00 across spring forward stays 09:00 local",
			value: "0 9 * * *", start: d(3, 27, 12, 0),
			want: []time.Time{d(3, 28, 9, 0), d(3, 29, 9, 0), d(3, 30, 9, 0)},
		},
		{
			name:  "09:00 across fall back stays 09:00 local",
			value: "0 9 * * *", start: d(10, 23, 12, 0),
			want: []time.Time{d(10, 24, 9, 0), d(10, 25, 9, 0), d(10, 26, 9, 0)},
		},
		{
			// 02:30 does not exist on 2026-03-29. robfig steps the hour
			// from 01:00 CET to 03:00 CEST, never sees hour 2, and so skips
			// that day entirely (Vixie cron would run at 03:00 instead).
			name:  "02:30 on spring forward day is skipped",
			value: "30 2 * * *", start: d(3, 28, 12, 0),
			want: []time.Time{d(3, 30, 2, 30), d(3, 31, 2, 30)},
		},
		{
			// 02:30 happens twice on 2026-10-25. robfig would yield both;
			// Next keeps a fixed-hour job to the first one.
			name:  "02:30 on fall back day runs once",
			value: "30 2 * * *", start: d(10, 24, 12, 0),
			want: []time.Time{
				time.Date(2026, 10, 25, 0, 30, 0, 0, time.UTC), // 02:30 CEST
				d(10, 26, 2, 30),
			},
		},
		{
			// An hour wildcard follows real time: the repeated hour has
			// two real half-past-twos, one hour apart, and both run.
			name:  "hourly at :30 keeps the repeated hour",
			value: "30 * * * *", start: d(10, 25, 1, 45),
			want: []time.Time{
				time.Date(2026, 10, 25, 0, 30, 0, 0, time.UTC), // 02:30 CEST
				time.Date(2026, 10, 25, 1, 30, 0, 0, time.UTC), // 02:30 CET
				time.Date(2026, 10, 25, 2, 30, 0, 0, time.UTC), // 03:30 CET
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ParseSchedule("cron", tt.value, loc, 0)
			require.NoError(t, err)
			due, err := s.First(tt.start)
			require.NoError(t, err)
			var got []time.Time
			for range tt.want {
				got = append(got, due)
				next, done := s.Next(due, due.Add(time.Second))
				require.False(t, done)
				due = next
			}
			for i := range tt.want {
				assert.True(t, tt.want[i].Equal(got[i]), "run %d: got %s, want %s", i, got[i].In(loc), tt.want[i].In(loc))
			}
		})
	}
}

func TestCronNextCollapsesMissed(t *testing.T) {
	loc := berlin(t)
	s, err := ParseSchedule("cron", "0 9 * * *", loc, 0)
	require.NoError(t, err)
	prevDue := time.Date(2026, 5, 1, 9, 0, 0, 0, loc)
	now := time.Date(2026, 5, 10, 15, 0, 0, 0, loc) // nine missed days
	next, done := s.Next(prevDue, now)
	require.False(t, done)
	assert.True(t, time.Date(2026, 5, 11, 9, 0, 0, 0, loc).Equal(next), "got %s", next)

	// The clock set back an hour after the 09:00 run must not repeat it.
	next, done = s.Next(prevDue, prevDue.Add(-time.Hour))
	require.False(t, done)
	assert.True(t, time.Date(2026, 5, 2, 9, 0, 0, 0, loc).Equal(next), "got %s", next)
}

func TestIntervalNext(t *testing.T) {
	base := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	tests := []struct {
		name         string
		value        string
		prevDue, now time.Time
		want         time.Time
	}{
		{"on time", "30m", base, base.Add(2 * time.Second), base.Add(30 * time.Minute)},
		{"late run keeps phase", "30m", base, base.Add(29 * time.Minute), base.Add(30 * time.Minute)},
		{"exactly at next boundary is skipped", "30m", base, base.Add(30 * time.Minute), base.Add(60 * time.Minute)},
		{"long downtime keeps phase", "30m", base, base.Add(3*24*time.Hour + 7*time.Minute), base.Add(3*24*time.Hour + 30*time.Minute)},
		{"@every anchors like interval", "", base, base.Add(5*time.Hour + time.Minute), base.Add(6 * time.Hour)},
		{"clock set back", "30m", base, base.Add(-time.Hour), base.Add(30 * time.Minute)},
		{"no previous due time", "30m", time.Time{}, base, base.Add(30 * time.Minute)},
		{"ancient anchor", "30m", time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), base, base.Add(30 * time.Minute)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ParseSchedule("interval", tt.value, time.UTC, time.Minute)
			if tt.value == "" {
				s, err = ParseSchedule("cron", "@every 1h", time.UTC, time.Minute)
			}
			require.NoError(t, err)
			next, done := s.Next(tt.prevDue, tt.now)
			require.False(t, done)
			assert.True(t, tt.want.Equal(next), "got %s, want %s", next, tt.want)
			assert.True(t, next.After(tt.now))
		})
	}
}

// TestIntervalDowntime simulates a host that was off for a week: the task
// runs once on start and then keeps its original phase.
func TestIntervalDowntime(t *testing.T) {
	created := time.Date(2026, 5, 1, 9, 7, 0, 0, time.UTC)
	s, err := ParseSchedule("interval", "2h", time.UTC, time.Minute)
	require.NoError(t, err)
	due, err := s.First(created)
	require.NoError(t, err)
	require.Equal(t, created.Add(2*time.Hour), due)

	restart := due.Add(7*24*time.Hour + 33*time.Minute)
	next, done := s.Next(due, restart)
	require.False(t, done)
	assert.True(t, next.After(restart))
	assert.LessOrEqual(t, next.Sub(restart), 2*time.Hour)
	assert.Zero(t, next.Sub(created)%(2*time.Hour), "phase lost: %s", next)
}

func FuzzParseSchedule(f *testing.F) {
	for _, seed := range []struct{ typ, value string }{
		{"cron", "0 9 * * *"}, {"cron", "*/5 * * * mon-fri"}, {"cron", "@daily"}, {"cron", "@every 90m"},
		{"cron", "TZ="}, {"cron", "CRON_TZ=Europe/Berlin 0 9 * * *"}, {"cron", "0 0 31 2 *"},
		{"cron", "1-2-3 * * * *"}, {"cron", "*/0 * * * *"}, {"cron", "0 0 0 0 0 0"},
		{"interval", "30m"}, {"interval", "-1h"}, {"interval", "9999999h"}, {"interval", "1.5h"},
		{"once", "2026-11-22T09:00:00+01:00"}, {"once", "0000-01-01T00:00:00Z"}, {"once", "9999-12-31T23:59:59Z"},
		{"weekly", "x"},
	} {
		f.Add(seed.typ, seed.value, int64(1700000000))
	}
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, typ, value string, unix int64) {
		s, err := ParseSchedule(typ, value, loc, time.Minute)
		if err != nil {
			return
		}
		// Keep now within a plausible range so robfig's search stays cheap.
		now := time.Unix(unix%(1<<34), 0)
		first, err := s.First(now)
		if err != nil {
			return
		}
		if !first.After(now) {
			t.Fatalf("%s %q: first %s not after now %s", typ, value, first, now)
		}
		later := first.Add(time.Minute)
		next, done := s.Next(first, later)
		if !done && !next.After(later) {
			t.Fatalf("%s %q: next %s not after now %s", typ, value, next, later)
		}
		if done && !next.IsZero() {
			t.Fatalf("%s %q: done with next %s", typ, value, next)
		}
	})
}

func BenchmarkNext(b *testing.B) {
	loc := berlin(b)
	now := time.Date(2026, 5, 1, 9, 0, 0, 0, loc)
	for _, c := range []struct{ typ, value string }{{"cron", "*/5 9-17 * * mon-fri"}, {"interval", "30m"}} {
		s, err := ParseSchedule(c.typ, c.value, loc, time.Minute)
		require.NoError(b, err)
		b.Run(c.typ, func(b *testing.B) {
			for b.Loop() {
				s.Next(now.Add(-time.Hour), now)
			}
		})
	}
}
