package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testRunner is a runner whose workspace is a temp dir.
func testRunner(t *testing.T) *runner {
	t.Helper()
	root := t.TempDir()
	opts := Options{
		WorkspaceDir: filepath.Join(root, "group"),
		GlobalDir:    filepath.Join(root, "global"),
		HomeDir:      filepath.Join(root, "home"),
	}
	for _, d := range []string{opts.WorkspaceDir, opts.GlobalDir, opts.HomeDir} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	return &runner{opts: opts, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// call runs a tool by name with a JSON input, as the loop does.
func (a *runner) call(name, input string) (string, bool) {
	return a.runTool(context.Background(), a.toolSet(), name, []byte(input))
}

func TestWriteReadFile(t *testing.T) {
	a := testRunner(t)
	out, isErr := a.call("write_file", `{"path":"sub/dir/a.txt","content":"one\ntwo\nthree\n"}`)
	require.False(t, isErr, out)
	abs := filepath.Join(a.opts.WorkspaceDir, "sub/dir/a.txt")
	assert.Equal(t, "wrote 14 bytes to "+abs, out)
	data, err := os.ReadFile(abs)
	require.NoError(t, err)
	assert.Equal(t, "one\ntwo\nthree\n", string(data))

	tests := []struct {
		name, input, want string
		isErr             bool
	}{
		{"whole", `{"path":"sub/dir/a.txt"}`, "one\ntwo\nthree\n", false},
		{"absolute", fmt.Sprintf(`{"path":%q}`, abs), "one\ntwo\nthree\n", false},
		{"offset", `{"path":"sub/dir/a.txt","offset":2}`, "two\nthree\n", false},
		{"offset and limit", `{"path":"sub/dir/a.txt","offset":2,"limit":1}`, "two\n\n[... more follows; continue with offset=3]", false},
		{"past end", `{"path":"sub/dir/a.txt","offset":9}`, "(offset 9 is past the end of the file: it has 3 lines)", false},
		{"negative", `{"path":"sub/dir/a.txt","offset":-1}`, "read_file: offset and limit must not be negative", true},
		{"missing", `{"path":"nope.txt"}`, "no such file", true},
		{"directory", `{"path":"sub"}`, "is a directory", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, isErr := a.call("read_file", tt.input)
			assert.Equal(t, tt.isErr, isErr, out)
			if tt.isErr {
				assert.Contains(t, out, tt.want)
			} else {
				assert.Equal(t, tt.want, out)
			}
		})
	}
}

func TestReadFileCapsHugeFile(t *testing.T) {
	a := testRunner(t)
	line := strings.Repeat("x", 1000) + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(a.opts.WorkspaceDir, "big"), []byte(strings.Repeat(line, 500)), 0o644))
	out, isErr := a.call("read_file", `{"path":"big"}`)
	require.False(t, isErr)
	assert.LessOrEqual(t, len(out), MaxToolResult)
	assert.Contains(t, out, "continue with offset=")

	require.NoError(t, os.WriteFile(filepath.Join(a.opts.WorkspaceDir, "oneline"), []byte(strings.Repeat("y", 200<<10)), 0o644))
	out, isErr = a.call("read_file", `{"path":"oneline"}`)
	require.False(t, isErr)
	assert.LessOrEqual(t, len(out), MaxToolResult)
	assert.Contains(t, out, "truncated")

	require.NoError(t, os.WriteFile(filepath.Join(a.opts.WorkspaceDir, "empty"), nil, 0o644))
	out, _ = a.call("read_file", `{"path":"empty"}`)
	assert.Equal(t, "(empty file)", out)
}

func TestEditFile(t *testing.T) {
	tests := []struct {
		name, content, input, want, wantFile string
		isErr                                bool
	}{
		{"once", "a b c", `{"path":"f","old_text":"b","new_text":"B"}`, "edited", "a B c", false},
		{"multi-line", "x\ny\nz\n", `{"path":"f","old_text":"y\nz","new_text":"Y"}`, "edited", "x\nY\n", false},
		{"absent", "a b c", `{"path":"f","old_text":"q","new_text":"Q"}`, "old_text not found", "a b c", true},
		{"twice", "a b b", `{"path":"f","old_text":"b","new_text":"B"}`, "old_text occurs 2 times", "a b b", true},
		{"empty old", "a", `{"path":"f","old_text":"","new_text":"B"}`, "old_text is empty", "a", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := testRunner(t)
			p := filepath.Join(a.opts.WorkspaceDir, "f")
			require.NoError(t, os.WriteFile(p, []byte(tt.content), 0o640))
			out, isErr := a.call("edit_file", tt.input)
			assert.Equal(t, tt.isErr, isErr, out)
			assert.Contains(t, out, tt.want)
			data, err := os.ReadFile(p)
			require.NoError(t, err)
			assert.Equal(t, tt.wantFile, string(data))
			st, err := os.Stat(p)
			require.NoError(t, err)
			assert.Equal(t, os.FileMode(0o640), st.Mode().Perm())
		})
	}
}

func TestListFiles(t *testing.T) {
	a := testRunner(t)
	for _, f := range []string{"a.md", "b.txt", "sub/c.md", "sub/deep/d.go"} {
		p := filepath.Join(a.opts.WorkspaceDir, f)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, nil, 0o644))
	}
	tests := []struct {
		name, input, want string
		isErr             bool
	}{
		{"all", `{}`, "a.md\nb.txt\nsub/\nsub/c.md\nsub/deep/\nsub/deep/d.go", false},
		{"pattern", `{"pattern":"*.md"}`, "a.md\nsub/c.md", false},
		{"subdir", `{"path":"sub"}`, "c.md\ndeep/\ndeep/d.go", false},
		{"no match", `{"pattern":"*.rs"}`, "(no matching files)", false},
		{"bad pattern", `{"pattern":"["}`, "bad pattern", true},
		{"missing", `{"path":"nope"}`, "no such file", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, isErr := a.call("list_files", tt.input)
			assert.Equal(t, tt.isErr, isErr, out)
			if tt.isErr {
				assert.Contains(t, out, tt.want)
			} else {
				assert.Equal(t, tt.want, out)
			}
		})
	}
}

func TestListFilesCapsEntries(t *testing.T) {
	a := testRunner(t)
	for i := 0; i < maxListEntries+5; i++ {
		require.NoError(t, os.WriteFile(filepath.Join(a.opts.WorkspaceDir, fmt.Sprintf("f%04d", i)), nil, 0o644))
	}
	out, isErr := a.call("list_files", `{}`)
	require.False(t, isErr)
	lines := strings.Split(out, "\n")
	assert.Len(t, lines, maxListEntries+1)
	assert.Contains(t, lines[len(lines)-1], "listing stopped")
}

func TestBash(t *testing.T) {
	a := testRunner(t)
	tests := []struct {
		name, input, want string
		isErr             bool
	}{
		{"output and cwd", `{"command":"echo hi; pwd"}`, "hi\n" + a.opts.WorkspaceDir + "\n[exit code 0]", false},
		{"stderr combined", `{"command":"echo out; echo err >&2"}`, "out\nerr\n[exit code 0]", false},
		{"exit code", `{"command":"echo bad; exit 3"}`, "bad\n[exit code 3]", true},
		{"no output", `{"command":"true"}`, "(no output)\n[exit code 0]", false},
		{"empty command", `{"command":"  "}`, "bash: command is empty", true},
		{"bad timeout", `{"command":"true","timeout_s":0}`, "bash: timeout_s must be positive", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, isErr := a.call("bash", tt.input)
			assert.Equal(t, tt.isErr, isErr, out)
			assert.Equal(t, tt.want, out)
		})
	}
}

func TestBashTimeoutKillsProcessGroup(t *testing.T) {
	a := testRunner(t)
	pidFile := filepath.Join(a.opts.WorkspaceDir, "bg.pid")
	out, isErr := a.call("bash", fmt.Sprintf(`{"command":"sleep 300 & echo $! > %s; echo started; wait","timeout_s":0.5}`, pidFile))
	require.True(t, isErr)
	assert.Contains(t, out, "started")
	assert.Contains(t, out, "timed out after 500ms; the command's process group was killed")

	data, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	require.NoError(t, err)
	assert.Eventually(t, func() bool { return !processRunning(pid) }, 10*time.Second, 10*time.Millisecond,
		"background sleep %d survived the timeout", pid)
}

func TestBashBackgroundChildDoesNotHang(t *testing.T) {
	a := testRunner(t)
	pidFile := filepath.Join(a.opts.WorkspaceDir, "bg.pid")
	out, isErr := a.call("bash", fmt.Sprintf(`{"command":"sleep 300 & echo $! > %s; echo done"}`, pidFile))
	require.False(t, isErr, out)
	assert.Equal(t, "done\n[exit code 0]", out)
	data, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	require.NoError(t, err)
	// SIGKILL is delivered asynchronously; wait for the process to be gone.
	assert.Eventually(t, func() bool { return !processRunning(pid) }, 10*time.Second, 10*time.Millisecond)
}

// processRunning reports whether pid exists and is not a zombie.
func processRunning(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || (s[i+2] != 'Z' && s[i+2] != 'X')
}

func TestBashOutputCapped(t *testing.T) {
	a := testRunner(t)
	out, isErr := a.call("bash", `{"command":"echo FIRST; head -c 300000 /dev/zero | tr '\\0' x; echo; echo LAST"}`)
	require.False(t, isErr)
	assert.LessOrEqual(t, len(out), MaxToolResult)
	assert.True(t, strings.HasPrefix(out, "FIRST\n"))
	assert.Contains(t, out, "bytes omitted")
	assert.True(t, strings.HasSuffix(out, "LAST\n[exit code 0]"), out[len(out)-50:])
}

func TestHeadTail(t *testing.T) {
	h := &headTail{max: 10}
	for _, s := range []string{"abc", "defgh", "ijklmnop", "qrstuvwxyz"} {
		_, _ = h.Write([]byte(s))
	}
	assert.Equal(t, "abcde\n[... 16 bytes omitted ...]\nvwxyz", h.String())
	small := &headTail{max: 10}
	_, _ = small.Write([]byte("abcdefg"))
	assert.Equal(t, "abcdefg", small.String())
}

func TestUnknownToolAndBadArgs(t *testing.T) {
	a := testRunner(t)
	out, isErr := a.call("rm_rf", `{}`)
	assert.True(t, isErr)
	assert.Contains(t, out, `unknown tool "rm_rf"; available tools: bash, read_file`)
	out, isErr = a.call("write_file", `{"path":"x","content":"y","mode":"0777"}`)
	assert.True(t, isErr)
	assert.Equal(t, `write_file: unknown argument "mode"`, out)
	out, isErr = a.call("bash", `not json`)
	assert.True(t, isErr)
	assert.Equal(t, "bash: arguments must be a JSON object", out)
}

// ipcServer serves h on a fresh unix socket and returns its path.
func ipcServer(t *testing.T, h http.Handler) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "cpsock") // short path: unix sockets have a ~108 byte limit
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "host.sock")
	ln, err := net.Listen("unix", path)
	require.NoError(t, err)
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return path
}

func TestHostTools(t *testing.T) {
	type seen struct {
		path string
		body map[string]any
	}
	var got []seen
	sock := ipcServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		got = append(got, seen{r.URL.Path, body})
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/ipc/send_message":
			if _, ok := body["chat_id"]; ok {
				w.WriteHeader(http.StatusForbidden)
				_, _ = io.WriteString(w, `{"error": "denied: only main may send to other chats"}`)
				return
			}
			_, _ = io.WriteString(w, `{"ok":true}`)
		case "/ipc/list_tasks":
			_, _ = io.WriteString(w, `[{"id":1,"group":"main"}]`)
		case "/ipc/pause_task":
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"error":"task 9 does not exist"}`)
		default:
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, `boom`)
		}
	}))
	a := testRunner(t)
	a.http = socketClient(sock)

	tests := []struct {
		tool, input, want string
		isErr             bool
	}{
		{"send_message", `{"text":"hi"}`, `{"ok":true}`, false},
		{"send_message", `{"text":"hi","chat_id":-100}`, "denied: only main may send to other chats", true},
		{"list_tasks", `{}`, `[{"id":1,"group":"main"}]`, false},
		{"pause_task", `{"task_id":9}`, "task 9 does not exist", true},
		{"list_chats", `{}`, "list_chats: host answered 500 Internal Server Error: boom", true},
		{"cancel_task", `{"task_id":"x"}`, `cancel_task: argument "task_id" must be of type integer, got string`, true},
	}
	for _, tt := range tests {
		out, isErr := a.call(tt.tool, tt.input)
		assert.Equal(t, tt.isErr, isErr, tt.tool)
		assert.Equal(t, tt.want, out, tt.tool)
	}
	// The strictly invalid call never reached the host.
	require.Len(t, got, 5)
	assert.Equal(t, "/ipc/send_message", got[1].path)
	assert.Equal(t, map[string]any{"text": "hi", "chat_id": float64(-100)}, got[1].body)
	assert.Equal(t, map[string]any{"text": "hi"}, got[0].body)
	assert.Equal(t, map[string]any{"task_id": float64(9)}, got[3].body)
}

func TestHostUnreachable(t *testing.T) {
	a := testRunner(t)
	a.http = socketClient(filepath.Join(t.TempDir(), "none.sock"))
	out, isErr := a.call("list_tasks", `{}`)
	assert.True(t, isErr)
	assert.Contains(t, out, "list_tasks: host unreachable")
}
