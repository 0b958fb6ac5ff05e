package cli

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/store"
)

// host is a data dir and a groups dir in a temporary directory, and the
// environment that points clawpen at them.
type host struct {
	t   *testing.T
	dir string
	env map[string]string
}

func newHost(t *testing.T) *host {
	dir := t.TempDir()
	return &host{t: t, dir: dir, env: map[string]string{
		"CLAWPEN_DATA_DIR":        filepath.Join(dir, "data"),
		"CLAWPEN_GROUPS_DIR":      filepath.Join(dir, "groups"),
		"CLAWPEN_MOUNT_ALLOWLIST": filepath.Join(dir, "allowlist.json"),
		"CLAWPEN_PROFILES":        filepath.Join(dir, "profiles.json"),
		"TZ":                      "UTC",
	}}
}

// run runs one command line in-process.
func (h *host) run(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = Run(context.Background(), args, Env{Version: "test", Stdout: &out, Stderr: &errb,
		Getenv: func(k string) string { return h.env[k] }})
	return code, out.String(), errb.String()
}

// ok runs a command line that must succeed and returns its output.
func (h *host) ok(args ...string) string {
	h.t.Helper()
	code, out, errs := h.run(args...)
	require.Equal(h.t, 0, code, "clawpen %q: %s%s", args, out, errs)
	return out
}

func (h *host) tasks() []domain.Task {
	h.t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(h.dir, "data", "clawpen.db"))
	require.NoError(h.t, err)
	defer st.Close()
	ts, err := st.ListTasks(context.Background(), "")
	require.NoError(h.t, err)
	return ts
}

// leaves lists every runnable command of the tree by its words.
func leaves(prefix []string, c *command) [][]string {
	var out [][]string
	for _, s := range c.subs {
		words := append(slices.Clone(prefix), s.name)
		if s.subs == nil {
			out = append(out, words)
		}
		out = append(out, leaves(words, s)...)
	}
	return out
}

func find(words []string) *command {
	c := commands()
	for _, w := range words {
		c = c.sub(w)
	}
	return c
}

// The commands and their shapes that README and DESIGN.md list.
func TestEveryDocumentedCommandExists(t *testing.T) {
	want := map[string]string{
		"serve":               "",
		"doctor":              "",
		"groups list":         "",
		"groups add":          "<chat_id> <folder> [name]",
		"groups remove":       "<folder>",
		"groups policy":       "<folder> <policy>",
		"groups profile":      "<folder> <name>",
		"profiles list":       "",
		"profiles check":      "",
		"groups mount add":    "<folder> <hostPath> <containerPath>",
		"groups mount remove": "<folder> <containerPath>",
		"groups mount list":   "<folder>",
		"mounts check":        "[folder]",
		"tasks list":          "[folder]",
		"tasks add":           "<folder> <cron|interval|once> <value> <prompt>",
		"tasks pause":         "<id>",
		"tasks resume":        "<id>",
		"tasks cancel":        "<id>",
		"tasks runs":          "<id>",
		"image build":         "",
		"run":                 "<folder> <command> [args...]",
		"version":             "",
	}
	got := map[string]string{}
	for _, words := range leaves(nil, commands()) {
		got[strings.Join(words, " ")] = find(words).args
	}
	for name, args := range want {
		if assert.Contains(t, got, name) {
			assert.Equal(t, args, got[name], name)
		}
	}
}

func TestHelpOfEveryCommand(t *testing.T) {
	h := newHost(t)
	h.env["CLAWPEN_SANDBOX"] = "chroot" // help needs no configuration, not even a valid one
	paths := [][]string{{}}
	var walk func(prefix []string, c *command)
	walk = func(prefix []string, c *command) {
		for _, s := range c.subs {
			words := append(slices.Clone(prefix), s.name)
			paths = append(paths, words)
			if s.subs != nil {
				walk(words, s)
			}
		}
	}
	walk(nil, commands())
	require.Greater(t, len(paths), 20)
	for _, words := range paths {
		for _, form := range [][]string{
			append(slices.Clone(words), "--help"),
			append(slices.Clone(words), "-h"),
			append([]string{"help"}, words...),
		} {
			t.Run(strings.Join(form, " "), func(t *testing.T) {
				code, out, errs := h.run(form...)
				require.Equal(t, 0, code, errs)
				assert.Empty(t, errs)
				assert.Contains(t, out, "Usage: "+strings.Join(append([]string{"clawpen"}, words...), " "))
				c := find(words)
				if c.subs != nil {
					for _, leaf := range leaves(nil, c) {
						assert.Contains(t, out, strings.Join(leaf, " "))
					}
					return
				}
				for _, arg := range strings.Fields(c.args) {
					assert.Contains(t, out, arg)
				}
				fs := flag.NewFlagSet("", flag.ContinueOnError)
				c.flags(fs)
				fs.VisitAll(func(f *flag.Flag) {
					assert.Contains(t, out, "--"+f.Name)
					assert.Contains(t, out, strings.ReplaceAll(f.Usage, "`", ""))
				})
			})
		}
	}
	// A flag after a command's arguments asks for help too.
	code, out, _ := h.run("tasks", "add", "main", "--help")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "--isolated")
}

func TestWrongCommandLinesExit2WithUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // the error names the bad part
	}{
		{nil, "missing command"},
		{[]string{"frob"}, `unknown command "frob"`},
		{[]string{"groups", "frob"}, `unknown command "frob"`},
		{[]string{"groups", "mount"}, "missing command"},
		{[]string{"mounts"}, "missing command"},
		{[]string{"image"}, "missing command"},
		{[]string{"image", "push"}, `unknown command "push"`},
		{[]string{"bench", "--quick"}, `unknown command "bench"`}, // clawpen-bench, never in the product
		{[]string{"help", "frob"}, `unknown command "frob"`},
		{[]string{"groups", "--rw", "list"}, "flag --rw before the command"},
		{[]string{"tasks", "add", "--bogus", "main", "once", "2030-01-01T00:00:00Z", "hi"}, "unknown flag --bogus"},
		{[]string{"groups", "list", "--isolated"}, "unknown flag --isolated"},
		{[]string{"serve", "--verbose=1"}, "unknown flag --verbose"},
		{[]string{"groups", "add"}, "missing argument <chat_id>"},
		{[]string{"groups", "add", "-1001"}, "missing argument <folder>"},
		{[]string{"groups", "add", "family", "-1001"}, `chat_id "family"`},
		{[]string{"groups", "add", "0", "family"}, `chat_id "0"`},
		{[]string{"groups", "remove"}, "missing argument <folder>"},
		{[]string{"groups", "remove", "a", "b"}, `unexpected argument "b"`},
		{[]string{"groups", "policy", "family"}, "missing argument <policy>"},
		{[]string{"groups", "profile", "family"}, "missing argument <name>"},
		{[]string{"run"}, "missing argument <folder>"},
		{[]string{"run", "family"}, "missing argument <command>"},
		{[]string{"run", "--bogus", "family", "sh"}, "unknown flag --bogus"},
		{[]string{"profiles", "frob"}, `unknown command "frob"`},
		{[]string{"groups", "policy", "family", `{"allow":"everyone"}`}, `policy {"allow":"everyone"}`},
		{[]string{"groups", "mount", "add", "family", "/srv"}, "missing argument <containerPath>"},
		{[]string{"groups", "mount", "add", "family", "/srv", "srv", "--write"}, "flag needs an argument: -write"},
		{[]string{"groups", "mount", "remove", "family"}, "missing argument <containerPath>"},
		{[]string{"groups", "mount", "list"}, "missing argument <folder>"},
		{[]string{"mounts", "check", "a", "b"}, `unexpected argument "b"`},
		{[]string{"tasks", "add", "main", "once"}, "missing argument <value>"},
		{[]string{"tasks", "add", "main", "once", "2030-01-01T00:00:00Z", "--isolated"}, "missing argument <prompt>"},
		{[]string{"tasks", "list", "a", "b"}, `unexpected argument "b"`},
		{[]string{"tasks", "pause"}, "missing argument <id>"},
		{[]string{"tasks", "resume", "1", "2"}, `unexpected argument "2"`},
		{[]string{"tasks", "cancel", "x"}, `id "x"`},
		{[]string{"tasks", "runs", "-3"}, `id "-3"`},
		{[]string{"version", "extra"}, `unexpected argument "extra"`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			h := newHost(t)
			code, out, errs := h.run(tc.args...)
			assert.Equal(t, 2, code, errs)
			assert.Empty(t, out)
			assert.Contains(t, errs, tc.want)
			assert.Contains(t, errs, "Usage: clawpen")
		})
	}
}

func TestIsolatedFlagInAnyPosition(t *testing.T) {
	h := newHost(t)
	h.ok("groups", "add", "-1001", "family", "Family")
	for _, args := range [][]string{
		{"--isolated", "family", "interval", "1h", "water", "the", "plants"},
		{"family", "--isolated", "interval", "1h", "water", "the", "plants"},
		{"family", "interval", "--isolated", "1h", "water", "the", "plants"},
		{"family", "interval", "1h", "--isolated", "water", "the", "plants"},
		{"family", "interval", "1h", "water", "--isolated", "the", "plants"},
		{"family", "interval", "1h", "water", "the", "plants", "--isolated"},
		{"family", "interval", "1h", "water", "the", "plants", "-isolated"},
		{"family", "interval", "1h", "water", "the", "plants", "--isolated=true"},
	} {
		h.ok(append([]string{"tasks", "add"}, args...)...)
	}
	h.ok("tasks", "add", "family", "interval", "1h", "water", "the", "plants")
	h.ok("tasks", "add", "family", "interval", "1h", "--", "--isolated", "is", "a", "word", "here")

	ts := h.tasks()
	require.Len(t, ts, 10)
	for _, task := range ts[:8] {
		assert.Equal(t, domain.ContextIsolated, task.ContextMode, "task %d", task.ID)
		assert.Equal(t, "water the plants", task.Prompt, "task %d", task.ID)
		assert.Equal(t, "family", task.Group)
		assert.Equal(t, "1h", task.ScheduleValue)
	}
	assert.Equal(t, domain.ContextGroup, ts[8].ContextMode)
	assert.Equal(t, domain.ContextGroup, ts[9].ContextMode)
	assert.Equal(t, "--isolated is a word here", ts[9].Prompt)
}

func TestGroupsAddListRemove(t *testing.T) {
	h := newHost(t)
	out := h.ok("groups", "add", "-1009998887", "family", "The", "Family")
	assert.Contains(t, out, "registered The Family (chat -1009998887) with folder groups/family")
	assert.DirExists(t, filepath.Join(h.dir, "groups", "family"))

	list := h.ok("groups", "list")
	assert.Regexp(t, `family\s+-1009998887\s+The Family`, list)
	assert.Equal(t, list, h.ok("groups"), "groups alone lists")

	assert.Contains(t, h.ok("groups", "remove", "family"), "unregistered family")
	assert.NotContains(t, h.ok("groups", "list"), "family")
	assert.DirExists(t, filepath.Join(h.dir, "groups", "family"), "the folder is kept")

	code, out, errs := h.run("groups", "remove", "family")
	assert.Equal(t, 1, code)
	assert.Empty(t, out)
	assert.Equal(t, "clawpen groups remove: no group has the folder \"family\"\n", errs)

	code, _, errs = h.run("groups", "remove", "main")
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "the main group cannot be removed")
}

func TestTaskOperationsOnAMissingID(t *testing.T) {
	h := newHost(t)
	for _, op := range []string{"pause", "resume", "cancel", "runs"} {
		for _, id := range []string{"42", "#42"} {
			code, out, errs := h.run("tasks", op, id)
			assert.Equal(t, 1, code, op)
			assert.Empty(t, out)
			assert.Equal(t, "clawpen tasks "+op+": no task has the id 42\n", errs)
		}
	}
}

func TestTaskPauseResumeCancel(t *testing.T) {
	h := newHost(t)
	h.ok("groups", "add", "-1001", "family")
	h.ok("tasks", "add", "family", "interval", "1h", "hello")
	assert.Contains(t, h.ok("tasks", "pause", "1"), "paused")
	assert.Equal(t, domain.TaskPaused, h.tasks()[0].Status)
	code, _, errs := h.run("tasks", "pause", "#1")
	assert.Equal(t, 1, code, "pausing a paused task fails")
	assert.Contains(t, errs, "not active")
	h.ok("tasks", "resume", "#1")
	assert.Equal(t, domain.TaskActive, h.tasks()[0].Status)
	h.ok("tasks", "cancel", "1")
	assert.Equal(t, domain.TaskCancelled, h.tasks()[0].Status)
	assert.Contains(t, h.ok("tasks", "runs", "1"), "STARTED")
}

func TestMountAddFlagsAnywhere(t *testing.T) {
	h := newHost(t)
	proj := filepath.Join(h.dir, "projects", "app")
	require.NoError(t, os.MkdirAll(filepath.Join(proj, "out"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(proj, "logs"), 0o755))
	require.NoError(t, os.WriteFile(h.env["CLAWPEN_MOUNT_ALLOWLIST"],
		[]byte(`{"allowedRoots":[{"path":"`+filepath.Join(h.dir, "projects")+`","allowReadWrite":true}],"nonMainReadOnly":false}`), 0o600))
	h.ok("groups", "add", "-1001", "family")

	h.ok("groups", "mount", "add", "--write", "out", "family", proj, "app", "--write=logs")
	h.ok("groups", "mount", "add", "family", "--rw", proj, "app-rw")
	list := h.ok("groups", "mount", "list", "family")
	assert.Contains(t, list, "app\t"+proj+"\tro\twrite:out\twrite:logs\n")
	assert.Contains(t, list, "app-rw\t"+proj+"\t")
	assert.Contains(t, h.ok("mounts", "check", "family"), "app")

	code, _, errs := h.run("groups", "mount", "add", "family", "/etc", "etc")
	assert.Equal(t, 1, code, "a path outside the allowlist is refused")
	assert.Contains(t, errs, "mount refused")

	h.ok("groups", "mount", "remove", "family", "app")
	assert.NotContains(t, h.ok("groups", "mount", "list", "family"), "write:out")
}

func TestConfigurationErrorsExit1(t *testing.T) {
	h := newHost(t)
	h.env["CLAWPEN_SANDBOX"] = "chroot"
	h.env["CLAWPEN_MIN_INTERVAL"] = "soon"
	code, out, errs := h.run("groups", "list")
	assert.Equal(t, 1, code)
	assert.Empty(t, out)
	assert.Contains(t, errs, "CLAWPEN_SANDBOX")
	assert.Contains(t, errs, "CLAWPEN_MIN_INTERVAL")

	code, out, _ = h.run("version")
	assert.Equal(t, 0, code, "version needs no configuration")
	assert.Equal(t, "clawpen test\n", out)
}

func TestMinIntervalComesFromTheConfiguration(t *testing.T) {
	h := newHost(t)
	h.ok("groups", "add", "-1001", "family")
	code, _, errs := h.run("tasks", "add", "family", "interval", "10s", "too often")
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "1m")
	h.env["CLAWPEN_MIN_INTERVAL"] = "5s"
	h.ok("tasks", "add", "family", "interval", "10s", "often enough")
}

// run's command is taken as it is after the folder: its flags are its own.
func TestParseRawAfter(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"family", "sh", "-c", "exit 7"}, []string{"family", "sh", "-c", "exit 7"}},
		{[]string{"family", "--", "sh", "-c", "x"}, []string{"family", "sh", "-c", "x"}},
		{[]string{"--", "family", "ls", "--", "-l"}, []string{"family", "ls", "--", "-l"}},
		{[]string{"family", "ls", "--help"}, []string{"family", "ls", "--help"}},
		{[]string{"family", "--", "--", "x"}, []string{"family", "--", "x"}},
	} {
		fs := flag.NewFlagSet("run", flag.ContinueOnError)
		got, err := parse(fs, tc.args, 1)
		require.NoError(t, err, "%q", tc.args)
		assert.Equal(t, tc.want, got, "%q", tc.args)
	}
}
