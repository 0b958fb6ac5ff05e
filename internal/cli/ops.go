package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/clawpen/clawpen/internal/app"
	"github.com/clawpen/clawpen/internal/store"
)

// Operating commands: backup, health, audit.

func backupCommand() *command {
	return &command{name: "backup", args: "<file>", min: 1, max: 1,
		summary: "copy the database, consistently, also while serve runs",
		detail: "Writes a copy of data/clawpen.db to file (a new file: an existing one is never overwritten)\n" +
			"through SQLite's online backup API, checks it with PRAGMA integrity_check, and prints how to\n" +
			"restore it. With CLAWPEN_DATABASE_URL, pg_dump writes the PostgreSQL database to file (its\n" +
			"custom format, one snapshot), checked with pg_restore --list; without pg_dump installed it is\n" +
			"refused. The copy holds chats and the audit log: keep it private (it is written 0600).",
		flags: noFlags(backupCmd)}
}

func backupCmd(ctx context.Context, s *session, args []string) error {
	st, err := s.store(ctx)
	if err != nil {
		return err
	}
	if err := st.Backup(ctx, args[0]); err != nil {
		return err
	}
	if s.cfg.DatabaseURL != "" {
		fmt.Fprintf(s.stdout, "Backup of %s written to %s (pg_restore --list reads it).\n\n"+
			"To restore it: stop clawpen serve on every host, then into an empty database\n"+
			"    pg_restore --no-owner --exit-on-error --dbname=<CLAWPEN_DATABASE_URL> %s\n"+
			"and start serve again.\n", st.Where(), args[0], args[0])
		return nil
	}
	db := app.DBPath(s.cfg.DataDir)
	fmt.Fprintf(s.stdout, "Backup written to %s (integrity check: ok).\n\n"+
		"To restore it: stop clawpen serve, then\n"+
		"    cp %s %s\n"+
		"    rm -f %s-wal %s-shm\n"+
		"and start serve again (it keeps the file's owner: run cp as the user serve runs as).\n",
		args[0], args[0], db, db, db)
	return nil
}

func healthCommand() *command {
	return &command{name: "health", summary: "ask a running serve whether it is ready (for health checks)",
		detail: "GETs /readyz (with --live: /healthz) on CLAWPEN_METRICS_ADDR and exits 0 when the host\n" +
			"answers 200, else 1 with what it said. For a container's or a unit's health check.",
		flags: func(fs *flag.FlagSet) action {
			live := fs.Bool("live", false, "only whether the process answers (/healthz), not whether it is ready")
			return func(ctx context.Context, s *session, _ []string) error {
				path := "/readyz"
				if *live {
					path = "/healthz"
				}
				return healthCmd(ctx, s, path)
			}
		}}
}

func healthCmd(ctx context.Context, s *session, path string) error {
	if s.cfg.MetricsAddr == "" {
		return errors.New("CLAWPEN_METRICS_ADDR is not set: serve has no health endpoint to ask")
	}
	host, port, err := net.SplitHostPort(s.cfg.MetricsAddr)
	if err != nil {
		return err
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1" // listening on every address includes loopback
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(host, port)+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("no answer: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	fmt.Fprint(s.stdout, string(body))
	return nil
}

func auditCommand() *command {
	return &command{name: "audit", summary: "the audit log: refusals and allowed rights-bearing actions, newest first",
		detail: "--since takes a duration back from now (24h, 90m) or a date or time (2026-01-02,\n" +
			"2026-01-02T15:04:05Z). --json prints one JSON object per line.",
		flags: func(fs *flag.FlagSet) action {
			group := fs.String("group", "", "only the entries of this group's folder")
			since := fs.String("since", "", "only entries at or after this time (24h, 2026-01-02, RFC 3339)")
			limit := fs.Int("limit", 100, "at most this many entries (0: all)")
			asJSON := fs.Bool("json", false, "one JSON object per line")
			return func(ctx context.Context, s *session, _ []string) error {
				f := store.AuditFilter{Group: *group, Limit: *limit}
				if *since != "" {
					t, err := parseSince(*since, time.Now(), s.cfg.TZ)
					if err != nil {
						return badUsage("--since %q: %v", *since, err)
					}
					f.Since = t
				}
				return auditCmd(ctx, s, f, *asJSON)
			}
		}}
}

// parseSince reads --since: a Go duration back from now, a date (midnight
// in loc) or an RFC 3339 time.
func parseSince(v string, now time.Time, loc *time.Location) (time.Time, error) {
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	if t, err := time.ParseInLocation(time.DateOnly, v, loc); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	return time.Time{}, errors.New("want a duration (24h), a date (2026-01-02) or an RFC 3339 time")
}

func auditCmd(ctx context.Context, s *session, f store.AuditFilter, asJSON bool) error {
	st, err := s.store(ctx)
	if err != nil {
		return err
	}
	es, err := st.AuditQuery(ctx, f)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(s.stdout)
		for _, e := range es {
			if err := enc.Encode(e); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(s.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tGROUP\tOPERATION\tTARGET\tDECISION\tREASON")
	for _, e := range es {
		g := e.Group
		if g == "" {
			g = "-"
		}
		target := e.Target
		if target == "" {
			target = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", e.Time.In(s.cfg.TZ).Format("2006-01-02 15:04:05"), g,
			printable(e.Operation), printable(target), e.Decision, printable(e.Reason))
	}
	return tw.Flush()
}

// printable is s with control characters (a terminal's escape sequences
// among them: a sandbox may have chosen the text) and invalid UTF-8
// written as Go escapes.
func printable(s string) string {
	q := strconv.QuoteToGraphic(s)
	return strings.ReplaceAll(q[1:len(q)-1], `\"`, `"`)
}
