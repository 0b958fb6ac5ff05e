package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
)

func def(fm string) []byte { return []byte("---\n" + fm + "\n---\nUse it well.\n") }

const argvTool = `name: argv
description: prints its argv
command: ["/usr/bin/printf", "[%s]", "--count", "{count}", "q={query}", "{query}"]
input_schema:
  type: object
  properties:
    query: {type: string, minLength: 1, maxLength: 20}
    count: {type: integer, minimum: 1, maximum: 10, default: 5}
  required: [query]
  additionalProperties: false`

func mustParse(t *testing.T, fm string) *Tool {
	t.Helper()
	tl, err := Parse("/tools/x.md", def(fm))
	require.NoError(t, err)
	return tl
}

func TestParse(t *testing.T) {
	tl := mustParse(t, argvTool+"\ngroups: all\ntimeout: 2s\nmax_output: 100\nenv: [KEY]")
	assert.Equal(t, "argv", tl.Name)
	assert.Equal(t, "Use it well.", tl.Guidance)
	assert.True(t, tl.Groups.All)
	assert.Equal(t, 2*time.Second, tl.Timeout)
	assert.Equal(t, 100, tl.MaxOutput)
	assert.Equal(t, []string{"KEY"}, tl.Env)

	d := mustParse(t, "name: d\ndescription: x\ncommand: [bin/run.sh]")
	assert.Equal(t, []string{domain.MainFolder}, d.Groups.Folders, "main is the default")
	assert.Equal(t, DefaultTimeout, d.Timeout)
	assert.Equal(t, "/tools/bin/run.sh", d.Command[0], "a relative program is in the tools dir")
	_, err := d.Prepare([]byte(`{"x":1}`))
	assert.ErrorIs(t, err, ErrArgs, "no input_schema: no arguments")

	l := mustParse(t, "name: l\ndescription: x\ncommand: [/bin/true]\ngroups: [main, family]")
	assert.Equal(t, []string{"main", "family"}, l.Groups.Folders)
}

func TestParseRejects(t *testing.T) {
	ok := "description: x\ncommand: [/bin/true]\n"
	for _, tc := range []struct{ name, file, want string }{
		{"no front matter", "name: x", "does not start"},
		{"unclosed", "---\nname: x\n", "no closing"},
		{"shadows bash", "---\nname: bash\n" + ok + "---\n", "shadows a built-in"},
		{"shadows send_file", "---\nname: send_file\n" + ok + "---\n", "shadows a built-in"},
		{"bad name", "---\nname: 'a b'\n" + ok + "---\n", "name"},
		{"unknown key", "---\nname: x\n" + ok + "shell: true\n---\n", "shell"},
		{"no description", "---\nname: x\ncommand: [/bin/true]\n---\n", "description"},
		{"no command", "---\nname: x\ndescription: x\n---\n", "command is required"},
		{"program placeholder", "---\nname: x\ndescription: x\ncommand: ['{p}']\n---\n", "program"},
		{"unknown placeholder", "---\nname: x\n" + ok[:len(ok)-len("command: [/bin/true]\n")] + "command: [/bin/echo, '{nope}']\n---\n", "names no property"},
		{"optional placeholder", "---\nname: x\ndescription: x\ncommand: [/bin/echo, '{q}']\ninput_schema: {type: object, properties: {q: {type: string}}}\n---\n", "required or have a default"},
		{"object placeholder", "---\nname: x\ndescription: x\ncommand: [/bin/echo, '{q}']\ninput_schema: {type: object, properties: {q: {type: object}}, required: [q]}\n---\n", "type string"},
		{"schema not object", "---\nname: x\n" + ok + "input_schema: {type: string}\n---\n", "object"},
		{"schema invalid", "---\nname: x\n" + ok + "input_schema: {type: object, properties: {q: {type: 7}}}\n---\n", "input_schema"},
		{"schema remote ref", "---\nname: x\n" + ok + "input_schema: {type: object, $ref: 'file:///etc/passwd'}\n---\n", "input_schema"},
		{"bad timeout", "---\nname: x\n" + ok + "timeout: forever\n---\n", "timeout"},
		{"timeout too long", "---\nname: x\n" + ok + "timeout: 1h\n---\n", "timeout"},
		{"bad max_output", "---\nname: x\n" + ok + "max_output: 0\n---\n", "max_output"},
		{"bad env", "---\nname: x\n" + ok + "env: ['A=B']\n---\n", "env"},
		{"bad groups", "---\nname: x\n" + ok + "groups: everyone\n---\n", "groups"},
		{"bad folder", "---\nname: x\n" + ok + "groups: ['../x']\n---\n", "groups"},
		{"empty groups", "---\nname: x\n" + ok + "groups: []\n---\n", "groups"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("/t/x.md", []byte(tc.file))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// A value is one literal argv element wherever it comes from; a value
// starting with "-" is passed as it is (the host cannot know the
// program's options: the definition puts "--" before it or the schema
// refuses it with a pattern).
func TestPlaceholdersNeverSplitOrInterpreted(t *testing.T) {
	tl := mustParse(t, argvTool)
	for _, v := range []string{"$(id)", "; rm -rf ~", "`id`", "a\nb", "-rf", "--count=9", "{count}", "a b  c", "'\"\\", "*"} {
		c, err := tl.Prepare([]byte(`{"query":` + quote(v) + `}`))
		require.NoError(t, err, v)
		assert.Equal(t, []string{"/usr/bin/printf", "[%s]", "--count", "5", "q=" + v, v}, c.Argv, v)
	}
}

func quote(s string) string {
	b, _ := jsonMarshal(s)
	return string(b)
}

func TestSchemaViolations(t *testing.T) {
	tl := mustParse(t, argvTool)
	for _, tc := range []struct{ name, args, want string }{
		{"missing required", `{}`, "query"},
		{"extra property", `{"query":"a","cmd":"id"}`, "additional"},
		{"wrong type", `{"query":1}`, "string"},
		{"too long", `{"query":"` + strings.Repeat("a", 21) + `"}`, "maxLength"},
		{"below minimum", `{"query":"a","count":0}`, "minimum"},
		{"not integer", `{"query":"a","count":1.5}`, "integer"},
		{"not an object", `["a"]`, "object"},
		{"not JSON", `{"query":`, "JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tl.Prepare([]byte(tc.args))
			require.ErrorIs(t, err, ErrArgs)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestDefaultsAndDigest(t *testing.T) {
	tl := mustParse(t, argvTool)
	a, err := tl.Prepare([]byte(`{"query":"x"}`))
	require.NoError(t, err)
	assert.Equal(t, "5", a.Argv[3], "default applied")
	b, err := tl.Prepare([]byte(`{ "count" : 5, "query":"x"}`))
	require.NoError(t, err)
	assert.Equal(t, a.Digest, b.Digest, "the digest is of canonical JSON, defaults applied")
	c, err := tl.Prepare([]byte(`{"query":"y"}`))
	require.NoError(t, err)
	assert.NotEqual(t, a.Digest, c.Digest)
	assert.Len(t, a.Digest, 64)
	assert.NotContains(t, a.Digest, "x")
}

func TestAuthorize(t *testing.T) {
	mainOnly := &Tool{Name: "m", Groups: Groups{Folders: []string{"main"}}}
	all := &Tool{Name: "a", Groups: Groups{All: true}}
	fam := &Tool{Name: "f", Groups: Groups{Folders: []string{"family"}}}
	listing := domain.Profile{Name: "p", Tools: []string{"m", "a", "f"}}
	none := domain.Profile{Name: "default"}
	mainC := domain.Caller{Group: "main", IsMain: true}
	famC := domain.Caller{Group: "family"}
	workC := domain.Caller{Group: "work"}
	owner := domain.Caller{Owner: true}
	for _, tc := range []struct {
		name  string
		c     domain.Caller
		t     *Tool
		p     domain.Profile
		allow bool
	}{
		{"main, main-only tool, no profile list", mainC, mainOnly, none, true},
		{"main, all", mainC, all, none, true},
		{"main, tool for family only", mainC, fam, listing, false},
		{"owner acts as main", owner, mainOnly, none, true},
		{"non-main, main-only tool even if listed", famC, mainOnly, listing, false},
		{"non-main, all, listed", famC, all, listing, true},
		{"non-main, all, not listed", famC, all, none, false},
		{"non-main, named, listed", famC, fam, listing, true},
		{"non-main, named, not listed", famC, fam, none, false},
		{"non-main, not named, listed", workC, fam, listing, false},
		{"no such tool", mainC, nil, listing, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Authorize(tc.c, tc.t, tc.p)
			assert.Equal(t, tc.allow, d.Allow, d.Reason)
			assert.NotEmpty(t, d.Reason)
		})
	}
}

func run(t *testing.T, tl *Tool, args string, env map[string]string) Result {
	t.Helper()
	c, err := tl.Prepare([]byte(args))
	require.NoError(t, err)
	res, err := tl.Run(context.Background(), c, func(k string) string { return env[k] })
	require.NoError(t, err)
	return res
}

func TestRunCleanEnvAndArgv(t *testing.T) {
	tl := mustParse(t, "name: e\ndescription: x\ncommand: [/usr/bin/env]\nenv: [TOOL_KEY, UNSET_ONE]")
	res := run(t, tl, `{}`, map[string]string{"PATH": "/usr/bin:/bin", "HOME": "/h", "LANG": "C.UTF-8", "TOOL_KEY": "k1", "SECRET": "no"})
	assert.Equal(t, 0, res.ExitCode)
	got := strings.Fields(res.Stdout)
	assert.ElementsMatch(t, []string{"PATH=/usr/bin:/bin", "HOME=/h", "LANG=C.UTF-8", "TOOL_KEY=k1"}, got)

	p := mustParse(t, argvTool)
	res = run(t, p, `{"query":"$(id) `+"`id`"+`"}`, nil)
	assert.Equal(t, "[--count][5][q=$(id) `id`][$(id) `id`]", res.Stdout)
}

func TestRunExitCodeStdinAndStderr(t *testing.T) {
	tl := mustParse(t, `name: s
description: x
command: ["/bin/sh", "-c", "cat; echo err >&2; exit 3"]`)
	res := run(t, tl, `{}`, map[string]string{"PATH": "/usr/bin:/bin"})
	assert.Equal(t, 3, res.ExitCode)
	assert.Equal(t, "", res.Stdout, "stdin is empty")
	assert.Equal(t, "err\n", res.Stderr)
	assert.False(t, res.TimedOut)
}

func TestRunCapsOutput(t *testing.T) {
	tl := mustParse(t, `name: big
description: x
max_output: 1000
command: ["/bin/sh", "-c", "head -c 100000 /dev/zero | tr '\\0' a; head -c 5 /dev/zero | tr '\\0' b >&2"]`)
	res := run(t, tl, `{}`, map[string]string{"PATH": "/usr/bin:/bin"})
	assert.Len(t, res.Stdout, 1000)
	assert.Equal(t, "bbbbb", res.Stderr)
	assert.True(t, res.Truncated)
	assert.Equal(t, 0, res.ExitCode)
}

// A tool that starts a child and hangs is killed at its timeout, child
// and all: the child's pid, which it prints first, is gone afterwards.
func TestRunTimeoutKillsGroup(t *testing.T) {
	tl := mustParse(t, `name: hang
description: x
timeout: 1s
command: ["/bin/sh", "-c", "sleep 300 & echo $!; wait"]`)
	res := run(t, tl, `{}`, map[string]string{"PATH": "/usr/bin:/bin"})
	assert.True(t, res.TimedOut)
	assert.NotEqual(t, 0, res.ExitCode)
	assertGone(t, res.Stdout)
}

// A child left behind by a leader that exited is killed when the call ends.
func TestRunKillsLeftovers(t *testing.T) {
	tl := mustParse(t, `name: bg
description: x
command: ["/bin/sh", "-c", "sleep 300 >/dev/null 2>&1 & echo $!"]`)
	res := run(t, tl, `{}`, map[string]string{"PATH": "/usr/bin:/bin"})
	assert.False(t, res.TimedOut)
	assertGone(t, res.Stdout)
}

// A grandchild that leaves the call's process group and session
// (setsid), as a daemon does, is killed too: it is not running when Run
// returns. It prints its pid and session before it detaches its output.
func TestRunKillsDetachedDescendants(t *testing.T) {
	tl := mustParse(t, `name: daemon
description: x
command: ["/bin/sh", "-c", "(setsid sh -c 'echo $$ $(cut -d\" \" -f6 /proc/$$/stat); exec sleep 1000 >/dev/null 2>&1' &) | cat"]`)
	res := run(t, tl, `{}`, map[string]string{"PATH": "/usr/bin:/bin"})
	var pid, sid int
	_, err := fmt.Sscan(res.Stdout, &pid, &sid)
	require.NoError(t, err, "pid and session in %q (stderr %q)", res.Stdout, res.Stderr)
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	require.Equal(t, pid, sid, "the grandchild leads a session of its own")
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	assert.True(t, err != nil || strings.Contains(string(st), ") Z "), "the detached grandchild %d still runs: %s", pid, st)
}

func assertGone(t *testing.T, pidText string) {
	t.Helper()
	var pid int
	_, err := fmtSscan(strings.TrimSpace(pidText), &pid)
	require.NoError(t, err, "child pid in %q", pidText)
	require.Eventually(t, func() bool {
		// Reaped by init, or a zombie there: either way not running.
		st, err := os.ReadFile(filepath.Join("/proc", strings.TrimSpace(pidText), "stat"))
		return err != nil || strings.Contains(string(st), ") Z ")
	}, 5*time.Second, 10*time.Millisecond, "child %d still runs", pid)
	_ = syscall.Kill(pid, syscall.SIGKILL)
}

func TestRunMissingProgram(t *testing.T) {
	tl := mustParse(t, "name: m\ndescription: x\ncommand: [/nonexistent/prog]")
	c, err := tl.Prepare(nil)
	require.NoError(t, err)
	_, err = tl.Run(context.Background(), c, func(string) string { return "" })
	require.Error(t, err)
}

func TestDirReloadsAndReportsProblems(t *testing.T) {
	dir := t.TempDir()
	d := NewDir(dir)
	assert.Empty(t, d.Load().Tools)
	write := func(name, content string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600))
	}
	write("a.md", string(def("name: a\ndescription: first\ncommand: [/bin/true]")))
	write("bash.md", string(def("name: bash\ndescription: x\ncommand: [/bin/true]")))
	write("broken.md", "no front matter")
	write("dup.md", string(def("name: a\ndescription: dup\ncommand: [/bin/true]")))
	write("notes.txt", "ignored")
	s := d.Load()
	require.Len(t, s.Tools, 1)
	assert.Equal(t, "first", s.Lookup("a").Description)
	var probs []string
	for _, p := range s.Problems {
		probs = append(probs, p.String())
	}
	assert.Len(t, probs, 3)
	assert.Contains(t, strings.Join(probs, "\n"), "bash.md: name \"bash\" shadows a built-in tool")
	assert.Contains(t, strings.Join(probs, "\n"), "dup.md: name \"a\" is already defined")

	write("a.md", string(def("name: a\ndescription: edited, longer\ncommand: [/bin/true]")))
	assert.Equal(t, "edited, longer", d.Load().Lookup("a").Description, "an edit is seen at the next load")
	require.NoError(t, os.Remove(filepath.Join(dir, "a.md")))
	assert.Equal(t, "dup", d.Load().Lookup("a").Description)
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

func fmtSscan(s string, v *int) (int, error) { return fmt.Sscan(s, v) }

// The examples shipped in configs/tools load without a problem.
func TestShippedExamplesLoad(t *testing.T) {
	s := NewDir("../../configs/tools").Load()
	assert.Empty(t, s.Problems)
	require.Len(t, s.Tools, 2)
	ws := s.Lookup("web_search")
	require.NotNil(t, ws)
	c, err := ws.Prepare([]byte(`{"query":"-x; $(id)"}`))
	require.NoError(t, err)
	assert.Equal(t, []string{"--count", "5", "--", "-x; $(id)"}, c.Argv[1:])
	assert.True(t, filepath.IsAbs(c.Argv[0]))
	assert.NotNil(t, s.Lookup("notify"))
}

const numberTool = `name: num
description: prints its numbers
command: ["/usr/bin/printf", "%s", "{i}", "{n}"]
input_schema:
  type: object
  properties:
    i: {type: integer, maximum: 10, default: 1}
    n: {type: number, default: 0.5}
  additionalProperties: false`

// A number reaches argv as the value the schema checked, in one form
// whatever its JSON spelling: "100e-1" is 10 to the validator and was
// "100e-1" to the program (whose atoi reads 100).
func TestNumbersReachArgvInOneForm(t *testing.T) {
	tl := mustParse(t, numberTool)
	for _, tc := range []struct{ args, i, n string }{
		{`{"i":100e-1}`, "10", "0.5"},
		{`{"i":1.0,"n":2E+3}`, "1", "2000"},
		{`{"i":-0,"n":-0.0}`, "0", "0"},
		{`{"i":-7,"n":-0.0e5}`, "-7", "0"},
		{`{"i":1E1,"n":2.50E-1}`, "10", "0.25"},
		{`{"i":10e-1,"n":-1.5e1}`, "1", "-15"},
		{`{"n":1e-7}`, "1", "0.0000001"},
		{`{"n":0.1000000000000000000000001}`, "1", "0.1000000000000000000000001"},
		{`{"n":9223372036854775809}`, "1", "9223372036854775809"},
		{`{"n":-9223372036854775809e-2}`, "1", "-92233720368547758.09"},
		{`{"n":123.456e1}`, "1", "1234.56"},
		{`{"i":-1000000000000000000000e-20}`, "-10", "0.5"},
	} {
		c, err := tl.Prepare([]byte(tc.args))
		require.NoError(t, err, tc.args)
		assert.Equal(t, []string{tc.i, tc.n}, c.Argv[2:], tc.args)
	}

	small := mustParse(t, strings.Replace(numberTool, "default: 0.5", "default: 1.0e-7", 1))
	c, err := small.Prepare(nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"1", "0.0000001"}, c.Argv[2:], "a default is in the same form")

	_, err = tl.Prepare([]byte(`{"i":1000e-2}`))
	assert.NoError(t, err, "10 is within the maximum of 10")
	_, err = tl.Prepare([]byte(`{"i":1001e-2}`))
	assert.ErrorIs(t, err, ErrArgs, "10.01 is not an integer")
	_, err = tl.Prepare([]byte(`{"i":11e0}`))
	assert.ErrorIs(t, err, ErrArgs, "11 is past the maximum")
}

// A number whose plain decimal form would be long is refused before it is
// written out (or checked), however short its JSON text.
func TestNumbersTooLongWrittenOut(t *testing.T) {
	tl := mustParse(t, numberTool)
	for _, args := range []string{`{"n":1e400}`, `{"n":1e-400}`, `{"n":-1e101}`, `{"n":1e999999999999999999999}`,
		`{"n":1e-999999999999999999999}`, `{"n":` + strings.Repeat("9", 101) + `}`} {
		_, err := tl.Prepare([]byte(args))
		require.ErrorIs(t, err, ErrArgs, args)
		assert.Contains(t, err.Error(), "digits", args)
	}
	c, err := tl.Prepare([]byte(`{"n":0e999999999999999999999}`))
	require.NoError(t, err, "zero is short in any spelling")
	assert.Equal(t, "0", c.Argv[3])
	c, err = tl.Prepare([]byte(`{"n":1e99}`))
	require.NoError(t, err)
	assert.Equal(t, "1"+strings.Repeat("0", 99), c.Argv[3], "100 characters is the most")
}

// The digest is of the values passed: equal numbers in any spelling have
// one digest, numbers that differ (even past float64's precision) two.
func TestDigestOfNumbersAsPassed(t *testing.T) {
	tl := mustParse(t, numberTool)
	digest := func(args string) string {
		c, err := tl.Prepare([]byte(args))
		require.NoError(t, err, args)
		return c.Digest
	}
	assert.Equal(t, digest(`{"i":10,"n":0.25}`), digest(`{"n":25e-2,"i":100e-1}`))
	assert.NotEqual(t, digest(`{"n":9223372036854775808}`), digest(`{"n":9223372036854775809}`))
	assert.NotEqual(t, digest(`{"n":1e99}`), digest(`{"n":1.0000000000000001e99}`))
}

// A *.md that is not a regular file is skipped with its reason, without a
// read that blocks (a FIFO no one writes) or never ends (/dev/zero), and
// the other tools load. A symlink to a regular file is followed.
func TestDirSkipsFilesThatAreNotRegular(t *testing.T) {
	dir := t.TempDir()
	elsewhere := filepath.Join(t.TempDir(), "real.md")
	require.NoError(t, os.WriteFile(elsewhere, def("name: linked\ndescription: x\ncommand: [/bin/true]"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.md"), def("name: a\ndescription: x\ncommand: [/bin/true]"), 0o600))
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "fifo.md"), 0o600))
	require.NoError(t, os.Symlink("/dev/zero", filepath.Join(dir, "zero.md")))
	require.NoError(t, os.Symlink(elsewhere, filepath.Join(dir, "linked.md")))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "sub.md"), 0o700))

	s := NewDir(dir).Load()
	assert.NotNil(t, s.Lookup("a"))
	assert.NotNil(t, s.Lookup("linked"), "a symlink to a regular file is followed")
	var probs []string
	for _, p := range s.Problems {
		probs = append(probs, p.String())
	}
	assert.ElementsMatch(t, []string{
		filepath.Join(dir, "fifo.md") + ": not a regular file: a named pipe",
		filepath.Join(dir, "zero.md") + ": not a regular file: a symlink to a character device",
		filepath.Join(dir, "sub.md") + ": not a regular file: a directory",
	}, probs)
}

// A file larger than a definition may be is refused having read no more
// than one byte past the bound.
func TestDirRefusesLargeFile(t *testing.T) {
	dir := t.TempDir()
	big := append(def("name: big\ndescription: x\ncommand: [/bin/true]"), bytes.Repeat([]byte("x"), maxFileBytes)...)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "big.md"), big, 0o600))
	s := NewDir(dir).Load()
	require.Len(t, s.Problems, 1)
	assert.Contains(t, s.Problems[0].Reason, "larger than")
}
