package bench

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/clawpen/clawpen/internal/approval"
	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/faketg"
	"github.com/clawpen/clawpen/internal/ops"
	"github.com/clawpen/clawpen/internal/store"
	"github.com/clawpen/clawpen/internal/telegram"
	"github.com/clawpen/clawpen/internal/tools"
)

// Row names of the approval section.
const (
	rowApprovalExec  = "fork-exec of /bin/date"
	rowApprovalPress = "owner's press → the tool reads the clock"
	rowApprovalHost  = "the host's own part, p50 (press → tool start)"
)

// approvalPressTarget is the p50 the host's part of an approval should
// stay within.
const approvalPressTarget = 5 * time.Millisecond

// approvalPress measures what the host adds between the owner's press of
// "Allow once" and the bridge tool's start: from the moment the fake
// Telegram hands the press out in a getUpdates answer to the moment the
// tool's process reads the clock. In between: the real Telegram client
// decodes the update, the broker checks the press and settles the request,
// the waiting call records the decision and its audit row in a real
// SQLite database and starts the tool (in a cgroup of its own). The
// tool's own start is in that figure; the host's own part is it less the
// bare fork-exec of the same tool (start to exit, so a little more than
// its start: the host's part is, if anything, shown smaller by the exit).
func approvalPress(ctx context.Context, o Options) Section {
	s := Section{Name: "approvals"}
	runs := o.runs()
	o.progress("bench: approvals, %d presses", runs)
	dir, err := os.MkdirTemp("", "clawpen-bench-approval-")
	if err != nil {
		s.Skipped = err.Error()
		return s
	}
	defer os.RemoveAll(dir)
	skip := func(what string, err error) Section {
		s.Skipped = what + ": " + err.Error()
		return s
	}
	toolsDir := filepath.Join(dir, "tools")
	if err := os.MkdirAll(toolsDir, 0o700); err != nil {
		return skip("tools dir", err)
	}
	def := "---\nname: stamp\ndescription: prints the clock\napproval: always\ncommand: [/bin/date, \"+%s%N\"]\n---\n"
	if err := os.WriteFile(filepath.Join(toolsDir, "stamp.md"), []byte(def), 0o600); err != nil {
		return skip("tool", err)
	}
	st, err := store.Open(ctx, filepath.Join(dir, "clawpen.db"))
	if err != nil {
		return skip("store", err)
	}
	defer st.Close()

	var handed atomic.Int64 // when the last update went out, unix ns
	tg := faketg.New(faketg.WithHandOut(func(_ int64, at time.Time) { handed.Store(at.UnixNano()) }))
	defer tg.Close()
	quiet := slog.New(slog.DiscardHandler)
	c, err := telegram.New(ctx, telegram.Config{Token: "1:bench", APIURL: tg.URL(), Logger: quiet,
		Pacing: telegram.Pacing{PerChatInterval: -1, GroupPerMinute: -1, GlobalPerSecond: -1}})
	if err != nil {
		return skip("telegram client", err)
	}
	const owner = int64(4242)
	broker := approval.New(approval.Config{Store: st, Messenger: c, Timeout: time.Minute, Logger: quiet,
		Owner: func(context.Context) (int64, error) { return owner, nil }})
	svc := ops.New(ops.Config{Store: st, GroupsDir: filepath.Join(dir, "groups"), Tools: tools.NewDir(toolsDir), ToolEnv: os.Getenv,
		Approvals: broker, Logger: quiet})
	pctx, stop := context.WithCancel(ctx)
	polled := make(chan error, 1)
	go func() {
		polled <- c.Poll(pctx, 0, func(ctx context.Context, u telegram.Update) error {
			if u.Press != nil {
				return broker.Press(ctx, *u.Press)
			}
			return nil
		}, func(context.Context, int64) error { return nil })
	}()
	defer func() { stop(); <-polled }()
	// Each press is of a run of its own: a run asks the owner at most 20 times.
	press := func(n int) (time.Duration, error) {
		caller := domain.Caller{Group: domain.MainFolder, IsMain: true, Run: fmt.Sprintf("bench-%d", n)}
		defer svc.EndRun(caller.Run)
		type result struct {
			out string
			err error
		}
		done := make(chan result, 1)
		go func() {
			res, err := svc.HostTool(ctx, caller, "stamp", nil)
			done <- result{res.Stdout, err}
		}()
		wctx, cancel := context.WithTimeout(ctx, time.Minute) // ends a call that was never asked
		qs, err := tg.WaitMatching(wctx, owner, n, func(m faketg.SentMessage) bool { return strings.HasPrefix(m.Visible, "Approval needed") })
		cancel()
		if err != nil {
			return 0, err
		}
		q := qs[n-1]
		if _, err := tg.PressButton(faketg.User{ID: owner}, q.ChatID, q.MessageID, "Allow once"); err != nil {
			return 0, err
		}
		r := <-done
		if r.err != nil {
			return 0, r.err
		}
		ns, err := strconv.ParseInt(strings.TrimSpace(r.out), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("the tool printed %q", r.out)
		}
		return time.Duration(ns - handed.Load()), nil
	}
	var eSamples, pSamples []time.Duration
	for i := -1; i < runs; i++ { // one warm-up each, interleaved
		t0 := time.Now()
		if err := exec.CommandContext(ctx, "/bin/date", "+%s%N").Run(); err != nil {
			return skip("/bin/date", err)
		}
		e := time.Since(t0)
		p, err := press(i + 2)
		if err != nil {
			return skip("press", err)
		}
		if i >= 0 {
			eSamples, pSamples = append(eSamples, e), append(pSamples, p)
		}
	}
	eRow, pRow := Latency(rowApprovalExec, eSamples), Latency(rowApprovalPress, pSamples)
	pRow.RatioTo = rowApprovalExec
	host := pRow.P50 - eRow.P50
	hRow := Value(rowApprovalHost, "ms", host).WithTarget(fmt.Sprintf("≤ %d ms", approvalPressTarget.Milliseconds()), host <= ms(approvalPressTarget))
	s.Rows = append(s.Rows, eRow, pRow, hRow)
	s.fillRatios()
	s.Notes = []string{
		"press → tool: from the fake Telegram writing the getUpdates answer that carries the owner's press to /bin/date reading the clock as the bridge tool; the real client, broker, operations service and SQLite in between, the tool in a cgroup of its own.",
		"fork-exec: exec.Command(\"/bin/date\").Run() from this process, start to exit.",
	}
	return s
}
