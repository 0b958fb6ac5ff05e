package router

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/runner"
	"github.com/clawpen/clawpen/internal/sandbox"
)

// HostStatus is what the host knows of itself for /status: the sandbox
// from Config.Host, what runs and waits from the queue, the allowlist from
// Config.Mounts.
type HostStatus struct {
	Backend    string         // the sandbox backend ("bwrap", "docker"); "" when none works
	NoSandbox  string         // why none works, when Backend is ""
	User       string         // who sandboxes run and write as
	Limits     string         // what holds their limits ("cgroup v1"), when known
	DiskQuota  int64          // bytes a group's folders may hold; 0 when unknown
	Running    []string       // groups whose agent runs now
	MaxRunning int            // how many may run at once
	Waiting    map[string]int // per group, runs waiting their turn
	Warm       []string       // groups whose sandbox waits ready for its job
	MaxWarm    int            // how many may wait; 0: warm sandboxes are off
	Reached    string         // runs that reached a sandbox limit since the start, in words; "": none
	Mounts     string         // the mount allowlist, in a sentence
	Profiles   string         // the profiles file and the groups it stops, in sentences
	Model      string         // the host's model (CLAWPEN_MODEL), for groups whose profile names none
	Models     string         // which group runs on which model, in a sentence
	Database   int64          // the database's size in bytes; 0 when unknown
	// Unrecorded messages were sent (or given up) but the outbox has not
	// recorded it yet; RecordErr is the store's last refusal.
	Unrecorded int
	RecordErr  string
}

// maxDueShown is how many of the next due tasks /status lists.
const maxDueShown = 5

func (r *Router) status(ctx context.Context) string {
	groups, err := r.cfg.Store.ListGroups(ctx)
	if err != nil {
		return "Status unavailable: " + err.Error()
	}
	host := r.cfg.Host
	qs := r.q.stats()
	host.Running, host.Waiting, host.MaxRunning = qs.Running, qs.Waiting, r.q.cfg.MaxConcurrent
	host.Warm, host.MaxWarm = r.cfg.Agents.Warm()
	host.Reached = r.limits.words()
	if r.cfg.Mounts != nil {
		host.Mounts = r.cfg.Mounts.Status()
	}
	profiles := r.cfg.Ops.Profiles()
	host.Profiles = profilesStatus(profiles, groups)
	host.Models = modelsStatus(profiles, groups, host.Model)
	if n, err := r.cfg.Store.Size(ctx); err == nil {
		host.Database = n
	}
	if n, err := r.delivery.unrecorded(); n > 0 {
		host.Unrecorded, host.RecordErr = n, err.Error()
	}
	ts, err := r.cfg.Store.ListTasks(ctx, "")
	if err != nil {
		return statusText(r.cfg.AssistantName, groups, host, nil, r.cfg.TZ) + "Tasks unavailable: " + err.Error() + "\n"
	}
	var due []domain.Task
	for _, t := range ts {
		if t.Status == domain.TaskActive && !t.NextRun.IsZero() {
			due = append(due, t)
		}
	}
	return statusText(r.cfg.AssistantName, groups, host, due, r.cfg.TZ) + r.ownerLoopStatus(ctx)
}

// statusText is /status in plain words: groups, sandbox, what runs and
// waits, the allowlist and the tasks due next.
func statusText(name string, groups []domain.Group, h HostStatus, due []domain.Task, tz *time.Location) string {
	var b strings.Builder
	folders := make([]string, 0, len(groups))
	for _, g := range groups {
		folders = append(folders, g.Folder)
	}
	slices.Sort(folders)
	if len(folders) == 0 {
		fmt.Fprintf(&b, "%s has no registered groups.\n", name)
	} else {
		fmt.Fprintf(&b, "%s serves %s: %s.\n", name, count(len(folders), "registered group", "registered groups"), joinAnd(folders))
	}

	if h.Backend == "" {
		b.WriteString("Sandbox: none, so no agent runs")
		if h.NoSandbox != "" {
			b.WriteString(": " + strings.TrimSuffix(h.NoSandbox, "."))
		}
		b.WriteString(".\n")
	} else {
		parts := []string{h.Backend}
		if h.User != "" {
			parts = append(parts, "as "+h.User)
		}
		if h.Limits != "" {
			parts = append(parts, "limits held by "+h.Limits)
		}
		if h.DiskQuota > 0 {
			parts = append(parts, "disk quota "+size(h.DiskQuota)+" per group")
		}
		fmt.Fprintf(&b, "Sandbox: %s.\n", strings.Join(parts, ", "))
	}

	at := ""
	if h.MaxRunning > 0 {
		at = fmt.Sprintf("up to %d at once", h.MaxRunning)
	}
	running := slices.Sorted(slices.Values(h.Running))
	switch {
	case len(running) == 0 && at == "":
		b.WriteString("Running: nothing.\n")
	case len(running) == 0:
		fmt.Fprintf(&b, "Running: nothing (%s).\n", at)
	case at == "":
		fmt.Fprintf(&b, "Running: %s.\n", joinAnd(running))
	default:
		fmt.Fprintf(&b, "Running: %s (%d of %s).\n", joinAnd(running), len(running), at)
	}

	var waiting []string
	for _, g := range slices.Sorted(maps.Keys(h.Waiting)) {
		if n := h.Waiting[g]; n > 0 {
			waiting = append(waiting, fmt.Sprintf("%s (%s)", g, count(n, "run", "runs")))
		}
	}
	if len(waiting) == 0 {
		b.WriteString("Waiting: nothing.\n")
	} else {
		fmt.Fprintf(&b, "Waiting: %s.\n", joinAnd(waiting))
	}
	switch {
	case h.MaxWarm == 0:
		b.WriteString("Warm sandboxes: off.\n")
	case len(h.Warm) == 0:
		fmt.Fprintf(&b, "Warm sandboxes: none ready (up to %d).\n", h.MaxWarm)
	default:
		fmt.Fprintf(&b, "Warm sandboxes: %s (%d of up to %d).\n", joinAnd(h.Warm), len(h.Warm), h.MaxWarm)
	}
	if h.Reached != "" {
		fmt.Fprintf(&b, "Runs that reached a sandbox limit since the start: %s.\n", h.Reached)
	}

	if h.Mounts != "" {
		b.WriteString(h.Mounts + "\n")
	}
	if h.Profiles != "" {
		b.WriteString(h.Profiles + "\n")
	}
	if h.Models != "" {
		b.WriteString(h.Models + "\n")
	}
	if h.Database > 0 {
		fmt.Fprintf(&b, "Database: %s.\n", size(h.Database))
	}
	if h.Unrecorded > 0 {
		fmt.Fprintf(&b, "Delivery: %s sent but not yet recorded as sent: the database refuses (%s). Only the record is retried; a restart before it works sends each once more.\n",
			count(h.Unrecorded, "message", "messages"), h.RecordErr)
	}

	if len(due) == 0 {
		b.WriteString("Tasks: none active.\n")
		return b.String()
	}
	due = slices.SortedFunc(slices.Values(due), func(a, b domain.Task) int { return a.NextRun.Compare(b.NextRun) })
	if len(due) > maxDueShown {
		fmt.Fprintf(&b, "Tasks: %d active. The next %d due:\n", len(due), maxDueShown)
	} else {
		fmt.Fprintf(&b, "Tasks: %d active. Next due:\n", len(due))
	}
	for _, t := range due[:min(maxDueShown, len(due))] {
		b.WriteString(taskLine(t, tz) + "\n")
	}
	return b.String()
}

// limitCount counts the runs that reached a sandbox limit since the host
// started, by limit, with the group of the last one.
type limitCount struct {
	mu   sync.Mutex // guards the maps
	n    map[sandbox.Limit]int
	last map[sandbox.Limit]string
}

// note counts the limit err names, if any.
func (c *limitCount) note(folder string, err error) {
	var l *runner.LimitError
	if !errors.As(err, &l) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n, c.last = map[sandbox.Limit]int{}, map[sandbox.Limit]string{}
	}
	c.n[l.Limit]++
	c.last[l.Limit] = folder
}

// words is the count as /status says it: "2 at memory (last: family), 1
// at disk (last: main)"; "" when none.
func (c *limitCount) words() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var parts []string
	for _, l := range []sandbox.Limit{sandbox.MemoryLimit, sandbox.ProcessLimit, sandbox.DiskLimit} {
		if n := c.n[l]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d at %s (last: %s)", n, l, c.last[l]))
		}
	}
	return joinAnd(parts)
}

// count is n with the noun in its number: "1 group", "2 groups".
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// joinAnd lists words as English does: "a", "a and b", "a, b and c".
func joinAnd(words []string) string {
	switch len(words) {
	case 0:
		return ""
	case 1:
		return words[0]
	}
	return strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
}

// size is a byte count in GiB when whole, else in MiB: "1 GiB", "1536 MiB".
func size(bytes int64) string {
	const mib, gib = 1 << 20, 1 << 30
	switch {
	case bytes >= gib && bytes%gib == 0:
		return fmt.Sprintf("%d GiB", bytes/gib)
	case bytes >= mib:
		return fmt.Sprintf("%d MiB", bytes/mib)
	default:
		return fmt.Sprintf("%d bytes", bytes)
	}
}
