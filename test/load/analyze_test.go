package load

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/faketg"
	"github.com/clawpen/clawpen/test/harness"
)

var markerRE = regexp.MustCompile(`mk\d{4}x\d{6}`)

// noticeText starts the notice a failed run leaves in a non-main group.
const noticeText = "Sorry, I could not answer"

// result is what the run showed.
type result struct {
	sentMsgs, stored, triggered int
	lost, extraStored           int
	lostList                    []string
	triggerMismatch             int

	answeredEcho, answeredNotice int
	unanswered                   int
	unansweredList               []string
	duplicates                   int
	duplicateList                []string
	crashResends                 int // the documented window: sent, host killed before it marked it (markers)
	crashResentMsgs              int // the Telegram messages those markers came in again
	maxResentPerChat             int // the most of them in one chat
	poisonEchoed                 int
	poisonList                   []string
	notices, ownerNotices        int
	groupSends                   int
	pendingAfterCursor           int
	zombiesLeft, zombiesBefore   int
	outboxLeft                   int

	echoLat, noticeLat []time.Duration
	// An answered message's latency in two parts: until its group's agent
	// started (the first "typing…" after it: polling, storing, waiting for
	// a sandbox slot) and from there until the answer reached Telegram (the
	// run, the outbox, pacing and retries of the send).
	startLat, runSendLat []time.Duration
	before, after        hostStats
	pushDur, total       time.Duration
}

// analyze reads the store (host stopped) and what the fake Telegram got.
func (r *run) analyze() result {
	t := r.t
	t.Helper()
	ctx := context.Background()
	st := r.h.Store()
	defer st.Close()

	var res result
	res.sentMsgs = len(r.msgs)
	planned := map[int][]*msg{}
	byMarker := map[string]*msg{}
	for _, m := range r.msgs {
		planned[m.Group] = append(planned[m.Group], m)
		byMarker[m.Marker] = m
		if m.Triggered {
			res.triggered++
		}
	}
	out, err := st.PendingOutbox(ctx)
	require.NoError(t, err)
	res.outboxLeft = len(out)
	res.ownerNotices = len(r.h.TG.SentTo(harness.OwnerID))

	for g := range r.size.Groups {
		chat := chatOf(g)
		stored, err := st.MessagesAfter(ctx, chat, 0, 0)
		require.NoError(t, err)
		res.stored += len(stored)
		var order []*msg // planned messages in stored (seq) order
		seen := map[string]bool{}
		for _, sm := range stored {
			mk := markerRE.FindString(sm.Text)
			m, ok := byMarker[mk]
			if !ok || m.Group != g || seen[mk] {
				res.extraStored++
				continue
			}
			seen[mk] = true
			if sm.Triggered != m.Triggered {
				res.triggerMismatch++
			}
			order = append(order, m)
		}
		for _, m := range planned[g] {
			if !seen[m.Marker] {
				res.lost++
				res.lostList = appendCapped(res.lostList, m.Marker)
			}
		}
		cursor, err := st.Cursor(ctx, folderOf(g))
		require.NoError(t, err)
		after, err := st.MessagesAfter(ctx, chat, cursor, 0)
		require.NoError(t, err)
		for _, m := range after {
			if m.Triggered {
				res.pendingAfterCursor++
			}
		}
		r.answers(&res, order, r.h.TG.SentTo(chat), r.h.TG.ChatActions(chat))
	}
	return res
}

// answers checks one group's answers. Every run's answer echoes the
// markers of the messages it covered (its context, the newest 200 of them:
// keep a group's backlog under that), a failed run's answer is the notice. So: no marker in two answers, and every triggered message
// either echoed once or inside a stretch of unechoed messages that a notice,
// sent after it, closed.
func (r *run) answers(res *result, order []*msg, sent []faketg.SentMessage, acts []faketg.ChatAction) {
	res.groupSends += len(sent)
	occ := map[string][]int{}
	var notices []faketg.SentMessage
	for i, s := range sent {
		if strings.Contains(s.Visible, noticeText) {
			notices = append(notices, s)
			continue
		}
		for _, mk := range uniq(markerRE.FindAllString(s.Visible, -1)) {
			occ[mk] = append(occ[mk], i)
		}
	}
	res.notices += len(notices)
	resent := map[int]bool{}
	defer func() {
		res.crashResentMsgs += len(resent)
		res.maxResentPerChat = max(res.maxResentPerChat, len(resent))
	}()
	for mk, is := range occ {
		if len(is) < 2 {
			continue
		}
		if r.crashResend(sent, is) {
			res.crashResends++
			for _, i := range is[1:] {
				resent[i] = true
			}
			continue
		}
		res.duplicates++
		res.duplicateList = appendCapped(res.duplicateList, fmt.Sprintf("%s in %d answers", mk, len(is)))
	}
	for _, m := range order {
		if m.Kind != "" && len(occ[m.Marker]) > 0 {
			res.poisonEchoed++
			res.poisonList = appendCapped(res.poisonList, m.Marker+" ("+m.Kind+")")
		}
		if m.Triggered && len(occ[m.Marker]) > 0 {
			res.answeredEcho++
			at := sent[occ[m.Marker][0]].Time
			res.echoLat = append(res.echoLat, at.Sub(m.Pushed))
			if i := slices.IndexFunc(acts, func(a faketg.ChatAction) bool { return !a.Time.Before(m.Pushed) }); i >= 0 && !acts[i].Time.After(at) {
				res.startLat = append(res.startLat, acts[i].Time.Sub(m.Pushed))
				res.runSendLat = append(res.runSendLat, at.Sub(acts[i].Time))
			}
		}
	}
	// Stretches of unechoed messages holding triggered ones, each closed by
	// its own notice, in order.
	next := 0
	var seg []*msg
	closeSeg := func() {
		var trig []*msg
		for _, m := range seg {
			if m.Triggered {
				trig = append(trig, m)
			}
		}
		seg = nil
		if len(trig) == 0 {
			return
		}
		last := trig[len(trig)-1].Pushed
		for next < len(notices) && notices[next].Time.Before(last) {
			next++
		}
		if next == len(notices) {
			r.dumpGroup(order, sent, occ)
			res.unanswered += len(trig)
			for _, m := range trig {
				res.unansweredList = appendCapped(res.unansweredList, m.Marker)
			}
			return
		}
		for _, m := range trig {
			res.noticeLat = append(res.noticeLat, notices[next].Time.Sub(m.Pushed))
		}
		res.answeredNotice += len(trig)
		next++
	}
	for _, m := range order {
		if len(occ[m.Marker]) > 0 {
			closeSeg()
			continue
		}
		seg = append(seg, m)
	}
	closeSeg()
}

// crashResend reports whether the repeated sends of one marker are the same
// message sent again across a crash: Telegram took it, the host was killed
// before it could mark it sent (the window decisions.md names).
func (r *run) crashResend(sent []faketg.SentMessage, is []int) bool {
	for k := 1; k < len(is); k++ {
		a, b := sent[is[k-1]], sent[is[k]]
		if a.Text != b.Text {
			return false
		}
		between := false
		for _, c := range r.crashes {
			if c.After(a.Time) && c.Before(b.Time) {
				between = true
			}
		}
		if !between {
			return false
		}
	}
	return true
}

func uniq(ss []string) []string {
	slices.Sort(ss)
	return slices.Compact(ss)
}

func appendCapped(list []string, s string) []string {
	if len(list) < 20 {
		return append(list, s)
	}
	return list
}

func pct(ds []time.Duration, p int) string {
	if len(ds) == 0 {
		return "-"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := min(len(s)-1, len(s)*p/100)
	return s[i].Round(time.Millisecond).String()
}

// summary is the table the run prints.
func (r *run) summary(res result) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	row := func(k string, v any) { fmt.Fprintf(w, "%s\t%v\n", k, v) }
	row("size", fmt.Sprintf("%s: %d groups, %d messages (steady %.0f/s, bursts of %d every %d), max %s sandboxes, agent timeout %s, seed %d",
		r.size.Name, r.size.Groups, r.size.Messages, r.size.Rate, r.size.BurstSize, r.size.BurstEvery, maxConcurrent, agentTimeout, r.seed))
	row("messages sent / stored", fmt.Sprintf("%d / %d (lost %d, unexpected %d, wrong trigger flag %d)", res.sentMsgs, res.stored, res.lost, res.extraStored, res.triggerMismatch))
	row("triggered / answered", fmt.Sprintf("%d / %d (by an answer %d, by a failure notice %d, unanswered %d)",
		res.triggered, res.answeredEcho+res.answeredNotice, res.answeredEcho, res.answeredNotice, res.unanswered))
	row("duplicates", fmt.Sprintf("%d (plus %d markers in %d messages resent across a crash: accepted by Telegram, host killed before marking it sent)", res.duplicates, res.crashResends, res.crashResentMsgs))
	row("poisoned runs (hang / garbage)", fmt.Sprintf("%d / %d planned, %d answered as if they worked", r.size.Hangs, r.size.Garbage, res.poisonEchoed))
	row("failure notices", fmt.Sprintf("%d in groups, %d reports to the owner", res.notices, res.ownerNotices))
	row("Telegram messages to groups", res.groupSends)
	row("left behind", fmt.Sprintf("%d triggered messages behind a cursor, %d outbox rows", res.pendingAfterCursor, res.outboxLeft))
	row("restarts (SIGKILL)", fmt.Sprintf("%d (%d)", r.restarts, len(r.crashes)))
	r.mu.Lock()
	kinds := make([]string, 0, len(r.faultCounts))
	for k := range r.faultCounts {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		row("fault injected", fmt.Sprintf("%s ×%d", k, r.faultCounts[k]))
	}
	row("sandboxes", fmt.Sprintf("%d bwrap processes seen by sampling, peak %d sandbox processes at once, %d orphaned", r.sandboxSeen, r.peakSandbox, len(r.orphans)))
	comms := map[string]int{}
	for _, z := range r.zombieSeen {
		comms[z.comm]++
	}
	row("zombies (host children exited, not reaped)", fmt.Sprintf("%d under the idle host before the last phase, %d after it; %d seen over the run %v", res.zombiesBefore, res.zombiesLeft, len(r.zombieSeen), comms))
	row("peak host", fmt.Sprintf("RSS %.1f MiB, threads %d", float64(r.peakRSSKiB)/1024, r.peakThreads))
	r.mu.Unlock()
	row("message → answer", fmt.Sprintf("p50 %s, p99 %s, max %s (n=%d)", pct(res.echoLat, 50), pct(res.echoLat, 99), pct(res.echoLat, 100), len(res.echoLat)))
	row("  of which until the agent started", fmt.Sprintf("p50 %s, p99 %s (n=%d)", pct(res.startLat, 50), pct(res.startLat, 99), len(res.startLat)))
	row("  of which run and send", fmt.Sprintf("p50 %s, p99 %s", pct(res.runSendLat, 50), pct(res.runSendLat, 99)))
	row("message → failure notice", fmt.Sprintf("p50 %s, p99 %s, max %s (n=%d)", pct(res.noticeLat, 50), pct(res.noticeLat, 99), pct(res.noticeLat, 100), len(res.noticeLat)))
	if res.before.RSSKiB > 0 { // measured by the load test, not the failover test
		row("host before last phase (idle)", res.before)
		row("host after last phase (idle)", res.after)
	}
	row("time", fmt.Sprintf("pushing %s, whole test %s", res.pushDur.Round(time.Second), res.total.Round(time.Second)))
	_ = w.Flush()
	return b.String()
}

// dumpGroup logs one group's messages and answers, to explain a failure.
func (r *run) dumpGroup(order []*msg, sent []faketg.SentMessage, occ map[string][]int) {
	var b strings.Builder
	for _, m := range order {
		fmt.Fprintf(&b, "  %s trig=%v kind=%q pushed=%s answers=%v\n", m.Marker, m.Triggered, m.Kind, m.Pushed.Format("15:04:05.000"), occ[m.Marker])
	}
	for i, s := range sent {
		txt := s.Visible
		if len(txt) > 80 {
			txt = txt[:80]
		}
		fmt.Fprintf(&b, "  sent %d at %s: %d markers %q\n", i, s.Time.Format("15:04:05.000"), len(markerRE.FindAllString(s.Visible, -1)), txt)
	}
	for i, c := range r.crashes {
		fmt.Fprintf(&b, "  crash %d at %s\n", i+1, c.Format("15:04:05.000"))
	}
	r.t.Logf("group with unanswered messages:\n%s", b.String())
}
