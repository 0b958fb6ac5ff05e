package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/clawpen/clawpen/internal/faketg"
	"github.com/clawpen/clawpen/internal/retry"
)

// What the warm path aims for: an answer faster than a host with no
// sandbox, and a waiting sandbox that costs little.
const (
	warmTargetBwrap  = 10 * time.Millisecond
	warmTargetDocker = 30 * time.Millisecond
	warmTargetGVisor = 15 * time.Millisecond // issue 25
	warmCPUTarget    = 14.0                  // ms of host + sandbox CPU per message (issue 26)
	warmHostCPU      = 7.0                   // ms of serve's own CPU per message (issue 26)
	firstAnswerRatio = 2.0                   // the first answer after start, in median answers (issue 26)
	warmMemTarget    = 10 << 20              // one warm sandbox
	warmMemGVisor    = 40 << 20              // one warm gVisor sandbox: runsc, its Sentry and gofer (issue 25)
)

// warmPath measures a message's round trip through serve (the fake
// Telegram hands the update out → the answer's sendMessage reaches it) with
// warm sandboxes and without, on each backend, in the same run; and the
// CPU per message of the host and its sandboxes, and the memory one warm
// sandbox holds (bwrap).
func warmPath(ctx context.Context, o Options) Section {
	s := Section{Name: "warm sandboxes"}
	runs := min(o.runs(), 60) // a second's pause between messages (see waitWarm)
	starts := 10
	if o.Quick {
		starts = 3
	}
	backends := []string{"bwrap"}
	if why := dockerUnavailable(ctx, o.Image); why == "" {
		backends = append(backends, "docker")
	} else {
		s.Notes = append(s.Notes, "docker rows skipped: "+why)
	}
	if why := gvisorUnavailable(ctx); why == "" {
		backends = append(backends, "gvisor")
	} else {
		s.Notes = append(s.Notes, "gvisor rows skipped: "+why)
	}
	for _, backend := range backends {
		n := runs
		if backend != "bwrap" {
			n = min(runs, o.dockerRuns())
		}
		for _, warm := range []int{3, 0} {
			label := "warm"
			if warm == 0 {
				label = "cold (CLAWPEN_WARM=0)"
			}
			o.progress("bench: %s, %s: %d owner messages through serve", backend, label, n)
			res, err := measureRoundTrips(ctx, o, backend, warm, n)
			if err != nil {
				s.Rows = append(s.Rows, Row{Name: fmt.Sprintf("%s %s: message → answer", backend, label), Unit: "ms", Skipped: err.Error()})
				continue
			}
			r := Latency(fmt.Sprintf("%s %s: message → answer", backend, label), res.roundTrips)
			if warm > 0 {
				target := map[string]time.Duration{"bwrap": warmTargetBwrap, "docker": warmTargetDocker, "gvisor": warmTargetGVisor}[backend]
				r = r.WithTarget(fmt.Sprintf("p50 ≤ %d ms", target.Milliseconds()), r.P50 <= ms(target))
			}
			s.Rows = append(s.Rows, r)
			for _, v := range []struct {
				what  string
				fresh bool
				idle  time.Duration
			}{
				{"first answer after a restart", false, 0},
				{"first answer after a first start", true, 0},
				{"first answer after an idle spell", false, idleSpell},
			} {
				what := v.what
				o.progress("bench: %s, %s: %s ×%d", backend, label, what, starts)
				firsts, err := measureFirstAnswers(ctx, o, backend, warm, starts, v.fresh, v.idle)
				first := Latency(fmt.Sprintf("%s %s: %s", backend, label, what), firsts)
				switch {
				case err != nil:
					first = Row{Name: first.Name, Unit: "ms", Skipped: err.Error()}
				case warm > 0:
					first = first.WithTarget(fmt.Sprintf("p50 ≤ %.0f× message → answer p50", firstAnswerRatio), first.P50 <= firstAnswerRatio*r.P50)
				}
				s.Rows = append(s.Rows, first)
			}
			cpu := Row{Name: fmt.Sprintf("%s %s: host + sandbox CPU per message", backend, label), Unit: "ms", Value: res.cpuPerMessage}
			host := Row{Name: fmt.Sprintf("%s %s:   of which serve itself", backend, label), Unit: "ms", Value: res.hostCPUPerMessage}
			if backend == "bwrap" {
				cpu = cpu.WithTarget(fmt.Sprintf("≤ %.0f ms", warmCPUTarget), res.cpuPerMessage <= warmCPUTarget)
				host = host.WithTarget(fmt.Sprintf("≤ %.0f ms", warmHostCPU), res.hostCPUPerMessage <= warmHostCPU)
			}
			s.Rows = append(s.Rows, cpu, host)
			if res.warmPSS > 0 {
				memTarget := int64(warmMemTarget)
				if backend == "gvisor" {
					memTarget = warmMemGVisor
				}
				s.Rows = append(s.Rows, Row{Name: backend + " one warm sandbox's memory (PSS)", Unit: "MiB", Value: float64(res.warmPSS) / (1 << 20)}.
					WithTarget(fmt.Sprintf("≤ %d MiB", memTarget>>20), res.warmPSS <= memTarget),
					Row{Name: backend + "   of which its own (anonymous)", Unit: "MiB", Value: float64(res.warmAnon) / (1 << 20)})
			}
		}
	}
	s.Notes = append(s.Notes,
		"first answer after a restart / a first start: the same round trip for one message sent as soon as a just started serve called getUpdates; serve is started again for each sample, on the same data directory (restart: its database and main group exist) or on a new one (first start); idle spell: on the same one, sent 1.5 s after the first getUpdates, once serve paged its idle program out as it does after a quiet minute.",
		"message → answer: the fake Telegram hands the owner's update out in a getUpdates answer → the answer's sendMessage reaches it; the fake model answers at once; one message at a time, 1.1 s apart (serve paces a chat to a message a second), the first not counted.",
		"CPU: `clawpen serve`'s own and its reaped children's (bwrap, its namespace init and the agent) from /proc over the counted messages, divided by their number; the fakes run in the bench, not in it. It includes the next warm sandbox's start. On Docker the containers' CPU is the engine's and is not in it.",
		"memory: the proportional set size of the processes of the main group's waiting sandbox (bwrap, its init, the agent; on gVisor runsc, its Sentry, gofer and ptrace stubs, the agent's memory being the Sentry's), read from /proc while it waits, and its anonymous part; the rest is the binaries' pages in the page cache, shared by every sandbox (one waiting sandbox alone carries all of them).",
		"gvisor: serve with CLAWPEN_SANDBOX=gvisor (runsc, ptrace platform), as many messages as the Docker rows; its CPU is serve's and its reaped children's (runsc and what it reaped: its Sentry and gofer).")
	return s
}

type roundTrips struct {
	roundTrips        []time.Duration
	cpuPerMessage     float64 // ms, serve and its reaped sandboxes
	hostCPUPerMessage float64 // ms, serve alone
	warmPSS           int64   // bytes; 0: not measured
	warmAnon          int64   // bytes of warmPSS that are the sandbox's own
}

// measureRoundTrips runs `clawpen serve` on backend with CLAWPEN_WARM=warm
// and sends runs+1 owner messages one at a time. Serve is a process of its
// own, so its CPU (and its reaped sandboxes') is not the fakes'.
func measureRoundTrips(ctx context.Context, o Options, backend string, warm, runs int) (res roundTrips, err error) {
	handed := make(chan handOut, 16)
	h, err := newWarmHost(ctx, o, backend, warm, handed)
	if err != nil {
		return res, err
	}
	defer h.Close()
	p, _, err := h.start(ctx)
	if err != nil {
		return res, err
	}
	defer p.stop()
	tg := h.f.TG

	var cpu0, host0 time.Duration
	for i := range runs + 1 {
		if i == 1 {
			if cpu0, host0, err = processCPU(p.pid()); err != nil {
				return res, err
			}
		}
		took, err := ask(ctx, tg, p, handed, fmt.Sprintf("message %d: REPLY ok", i))
		if err == nil {
			// The next message finds its sandbox waiting (when warm), as it
			// would after any pause longer than a sandbox's start.
			wctx, wcancel := context.WithTimeout(ctx, time.Minute)
			err = waitWarm(wctx, backend)
			wcancel()
		}
		if err != nil {
			return res, fmt.Errorf("message %d: %w", i, err)
		}
		if i > 0 {
			res.roundTrips = append(res.roundTrips, took)
		}
	}
	cpu1, host1, err := processCPU(p.pid())
	if err != nil {
		return res, err
	}
	res.cpuPerMessage = ms(cpu1-cpu0) / float64(runs)
	res.hostCPUPerMessage = ms(host1-host0) / float64(runs)
	if warm > 0 && backend != "docker" {
		res.warmPSS, res.warmAnon = sandboxPSS(p.pid())
	}
	return res, nil
}

// measureFirstAnswers starts `clawpen serve` on backend with
// CLAWPEN_WARM=warm `starts` times and sends one owner message as soon as
// each start called getUpdates: the round trip of the first message a host
// answers. fresh gives each start a data directory of its own (a first
// start: no database, no main group yet); else they restart on one. idle
// is how long serve idles between its first getUpdates and the message.
func measureFirstAnswers(ctx context.Context, o Options, backend string, warm, starts int, fresh bool, idle time.Duration) ([]time.Duration, error) {
	handed := make(chan handOut, 16)
	var h *serveHost
	defer func() {
		if h != nil {
			h.Close()
		}
	}()
	var firsts []time.Duration
	for i := range starts {
		if h == nil || fresh {
			if h != nil {
				h.Close()
			}
			var err error
			if h, err = newWarmHost(ctx, o, backend, warm, handed); err != nil {
				return nil, err
			}
		}
		tg := h.f.TG
		p, _, err := h.start(ctx)
		if err != nil {
			return nil, err
		}
		if err := retry.Sleep(ctx, idle); err != nil {
			p.stop()
			return nil, err
		}
		took, err := ask(ctx, tg, p, handed, fmt.Sprintf("first message of start %d: REPLY ok", i))
		p.stop()
		if err != nil {
			return nil, fmt.Errorf("start %d: %w", i, err)
		}
		firsts = append(firsts, took)
	}
	return firsts, nil
}

// newWarmHost is a serve host on backend with CLAWPEN_WARM=warm, one run
// at a time, whose fake Telegram tells handed when it hands out an update.
func newWarmHost(ctx context.Context, o Options, backend string, warm int, handed chan<- handOut) (*serveHost, error) {
	return newServeHost(ctx, o, 0, map[string]string{"CLAWPEN_MAX_CONCURRENT": "1", "TZ": "UTC", "CLAWPEN_WARM": strconv.Itoa(warm),
		"CLAWPEN_SANDBOX": backend, "CLAWPEN_AGENT_IMAGE": o.Image},
		faketg.WithHandOut(func(id int64, at time.Time) {
			select {
			case handed <- handOut{id, at}:
			default:
			}
		}))
}

// ask sends the owner's text to p and waits for the answer: the time from
// the fake Telegram handing the update out to the answer's send.
func ask(ctx context.Context, tg *faketg.Server, p *serveProc, handed <-chan handOut, text string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	before := len(tg.SentTo(ownerID))
	id := tg.PushMessage(ownerID, "private", "", faketg.User{ID: ownerID, FirstName: "owner"}, text)
	var handedAt time.Time
	for handedAt.IsZero() {
		select {
		case hd := <-handed:
			if hd.id == id {
				handedAt = hd.at
			}
		case <-p.exited:
			return 0, fmt.Errorf("serve exited:\n%s", p.logs.tail())
		case <-ctx.Done():
			return 0, fmt.Errorf("update never handed out: %w", ctx.Err())
		}
	}
	sent, err := tg.WaitSent(ctx, ownerID, before+1)
	if err != nil {
		return 0, err
	}
	return sent[before].Time.Sub(handedAt), nil
}

// idleSpell is how long serve idles before the message of "first answer
// after an idle spell": past its first page-out of its idle program (500
// ms after start), which a quiet minute after work repeats.
const idleSpell = 1500 * time.Millisecond

// processCPU is pid's user and system CPU with its reaped children's, and
// its own alone (/proc/<pid>/stat: utime, stime, cutime, cstime, in clock
// ticks of 10 ms; over many messages the tick is small).
func processCPU(pid int) (all, own time.Duration, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, fmt.Errorf("cpu of serve: %w", err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 15 {
		return 0, 0, fmt.Errorf("cpu of serve: short stat %q", s)
	}
	var ticks [4]int64
	for i, v := range f[11:15] { // fields 14-17 of stat
		if ticks[i], err = strconv.ParseInt(v, 10, 64); err != nil {
			return 0, 0, fmt.Errorf("cpu of serve: %w", err)
		}
	}
	tick := 10 * time.Millisecond
	return time.Duration(ticks[0]+ticks[1]+ticks[2]+ticks[3]) * tick, time.Duration(ticks[0]+ticks[1]) * tick, nil
}

// waitWarm pauses between messages, as a person does: long enough for the
// next warm sandbox to start (bwrap ~15 ms, Docker ~300 ms) and for serve's
// pacing of one message per second to a chat, which would otherwise hold
// the answer back. A sleep, not a poll: serve's CPU is what is counted.
func waitWarm(ctx context.Context, _ string) error {
	t := time.NewTimer(1100 * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// sandboxPSS sums the proportional set size of this process's descendant
// processes (the waiting sandbox's bwrap, namespace init and agent), and
// the anonymous part of it: the rest is the binaries' pages, shared by every
// sandbox and reclaimable.
func sandboxPSS(serve int) (pss, anon int64) {
	for _, pid := range descendants(serve, "") {
		f, err := os.Open(filepath.Join("/proc", pid, "smaps_rollup"))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), ":")
			if !ok || (k != "Pss" && k != "Pss_Anon") {
				continue
			}
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				continue
			}
			if k == "Pss" {
				pss += kb << 10
			} else {
				anon += kb << 10
			}
		}
		f.Close()
	}
	return pss, anon
}

// descendants lists the pids of root's descendants, those named comm when
// it is not empty.
func descendants(root int, comm string) []string {
	self := root
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	parent := map[int]int{}
	names := map[int]string{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		i, j := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if i < 0 || j < i {
			continue
		}
		f := strings.Fields(s[j+1:])
		if len(f) < 2 || f[0] == "Z" {
			continue
		}
		pp, _ := strconv.Atoi(f[1])
		parent[pid], names[pid] = pp, s[i+1:j]
	}
	var out []string
	for pid := range parent {
		if comm != "" && names[pid] != comm {
			continue
		}
		for p, n := parent[pid], 0; p > 1 && n < 64; p, n = parent[p], n+1 {
			if p == self {
				out = append(out, strconv.Itoa(pid))
				break
			}
		}
	}
	return out
}
