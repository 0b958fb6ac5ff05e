package router

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/clawpen/clawpen/internal/domain"
)

// /status speaks plain English: numbers agree with their nouns, lists are
// joined as a person writes them, and nothing of Go's shows (map[], []).
func TestStatusText(t *testing.T) {
	main := domain.Group{Folder: "main"}
	family := domain.Group{Folder: "family"}
	work := domain.Group{Folder: "work"}
	next := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	task := func(id int64, at time.Time) domain.Task {
		return domain.Task{ID: id, Group: "family", ScheduleType: "interval", ScheduleValue: "1h", Status: domain.TaskActive, NextRun: at, Prompt: "water the plants"}
	}
	bwrap := HostStatus{Backend: "bwrap", User: "clawpen-sandbox", Limits: "cgroup v1", DiskQuota: 1 << 30, MaxRunning: 3, MaxWarm: 3,
		Mounts: "Mount allowlist: none at /root/.config/clawpen/mount-allowlist.json (no extra mounts)."}
	for _, tc := range []struct {
		name   string
		groups []domain.Group
		host   HostStatus
		due    []domain.Task
		want   string
	}{
		{"idle, one group", []domain.Group{main}, bwrap, nil,
			"Andy serves 1 registered group: main.\n" +
				"Sandbox: bwrap, as clawpen-sandbox, limits held by cgroup v1, disk quota 1 GiB per group.\n" +
				"Running: nothing (up to 3 at once).\n" +
				"Waiting: nothing.\n" +
				"Warm sandboxes: none ready (up to 3).\n" +
				"Mount allowlist: none at /root/.config/clawpen/mount-allowlist.json (no extra mounts).\n" +
				"Tasks: none active.\n"},
		{"busy, three groups", []domain.Group{work, main, family},
			func() HostStatus {
				h := bwrap
				h.Running, h.Waiting = []string{"main", "family"}, map[string]int{"work": 1, "family": 2, "main": 0}
				h.Warm = []string{"work"}
				h.Reached = "2 at memory (last: work)"
				return h
			}(), []domain.Task{task(2, next.Add(time.Hour)), task(1, next)},
			"Andy serves 3 registered groups: family, main and work.\n" +
				"Sandbox: bwrap, as clawpen-sandbox, limits held by cgroup v1, disk quota 1 GiB per group.\n" +
				"Running: family and main (2 of up to 3 at once).\n" +
				"Waiting: family (2 runs) and work (1 run).\n" +
				"Warm sandboxes: work (1 of up to 3).\n" +
				"Runs that reached a sandbox limit since the start: 2 at memory (last: work).\n" +
				"Mount allowlist: none at /root/.config/clawpen/mount-allowlist.json (no extra mounts).\n" +
				"Tasks: 2 active. Next due:\n" +
				"#1 family every ` 1h `, next 2026-11-24 09:00 UTC — ` water the plants `\n" +
				"#2 family every ` 1h `, next 2026-11-24 10:00 UTC — ` water the plants `\n"},
		{"no sandbox", []domain.Group{main}, HostStatus{NoSandbox: "no sandbox: bwrap: bubblewrap not found.", MaxRunning: 1}, nil,
			"Andy serves 1 registered group: main.\n" +
				"Sandbox: none, so no agent runs: no sandbox: bwrap: bubblewrap not found.\n" +
				"Running: nothing (up to 1 at once).\n" +
				"Waiting: nothing.\n" +
				"Warm sandboxes: off.\n" +
				"Tasks: none active.\n"},
		{"docker as the host's own user, quota in MiB", []domain.Group{main},
			HostStatus{Backend: "docker", User: "the host's own user", Limits: "Docker's cgroups", DiskQuota: 1536 << 20, MaxRunning: 2}, nil,
			"Andy serves 1 registered group: main.\n" +
				"Sandbox: docker, as the host's own user, limits held by Docker's cgroups, disk quota 1536 MiB per group.\n" +
				"Running: nothing (up to 2 at once).\n" +
				"Waiting: nothing.\n" +
				"Warm sandboxes: off.\n" +
				"Tasks: none active.\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := statusText("Andy", tc.groups, tc.host, tc.due, time.UTC)
			assert.Equal(t, tc.want, got)
			assert.NotContains(t, got, "map[")
		})
	}

	t.Run("more tasks than shown", func(t *testing.T) {
		var due []domain.Task
		for i := range 7 {
			due = append(due, task(int64(7-i), next.Add(time.Duration(7-i)*time.Hour)))
		}
		got := statusText("Andy", []domain.Group{main}, bwrap, due, time.UTC)
		assert.Contains(t, got, "Tasks: 7 active. The next 5 due:\n#1 family")
		assert.NotContains(t, got, "#6 ")
	})
}

func TestJoinAndCount(t *testing.T) {
	for _, tc := range []struct {
		words []string
		want  string
	}{
		{nil, ""},
		{[]string{"a"}, "a"},
		{[]string{"a", "b"}, "a and b"},
		{[]string{"a", "b", "c"}, "a, b and c"},
	} {
		assert.Equal(t, tc.want, joinAnd(tc.words))
	}
	assert.Equal(t, "1 run", count(1, "run", "runs"))
	assert.Equal(t, "0 runs", count(0, "run", "runs"))
	assert.Equal(t, "2 runs", count(2, "run", "runs"))
}
