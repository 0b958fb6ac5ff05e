package ops

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/beneath"
	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/mounts"
)

// pngHeader is the start of a PNG file, enough for content sniffing.
var pngHeader = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")

func TestSendFile(t *testing.T) {
	cases := []struct {
		name   string
		id     domain.Caller
		prep   func(t *testing.T, groups string)
		body   string
		status int
		kind   string
		errSub string
	}{
		{"document", familyID, write("family/out/report.txt", "hello"), `{"path":"/workspace/group/out/report.txt","caption":"the report"}`, 200, domain.OutDocument, ""},
		{"photo", familyID, write("family/pic.png", string(pngHeader)), `{"path":"/workspace/group/pic.png"}`, 200, domain.OutPhoto, ""},
		{"png name, other bytes", familyID, write("family/fake.png", "not an image"), `{"path":"/workspace/group/fake.png"}`, 200, domain.OutDocument, ""},
		{"empty file", familyID, write("family/empty.txt", ""), `{"path":"/workspace/group/empty.txt"}`, 200, domain.OutDocument, ""},
		{"main to another group", mainID, write("main/a.txt", "x"), `{"path":"/workspace/group/a.txt","chat_id":-200}`, 200, domain.OutDocument, ""},
		{"non-main to another chat", familyID, write("family/a.txt", "x"), `{"path":"/workspace/group/a.txt","chat_id":-200}`, 403, "", "may only send"},
		{"non-main to main", familyID, write("family/a.txt", "x"), `{"path":"/workspace/group/a.txt","chat_id":42}`, 403, "", "denied: "},
		{"symlink to a host file", familyID, link("/etc/passwd", "family/pw"), `{"path":"/workspace/group/pw"}`, 403, "", "symlink"},
		{"symlink in a parent", familyID, link("/etc", "family/etc"), `{"path":"/workspace/group/etc/passwd"}`, 403, "", "symlink"},
		{"symlink to another group", familyID, both(write("work/secret.txt", "WORK"), linkIn("work", "family/w")), `{"path":"/workspace/group/w/secret.txt"}`, 403, "", "symlink"},
		{"dot-dot to another group", familyID, write("work/secret.txt", "WORK"), `{"path":"/workspace/group/../work/secret.txt"}`, 403, "", "only files under"},
		{"host path", familyID, nil, `{"path":"/etc/passwd"}`, 403, "", "only files under"},
		{"relative path", familyID, nil, `{"path":"../work/secret.txt"}`, 403, "", "only files under"},
		{"unknown extra mount", familyID, nil, `{"path":"/workspace/extra/x/a"}`, 403, "", "no extra mount"},
		{"fifo", familyID, fifo("family/pipe"), `{"path":"/workspace/group/pipe"}`, 403, "", "not a regular file"},
		{"directory", familyID, write("family/d/x", "x"), `{"path":"/workspace/group/d"}`, 403, "", "not a regular file"},
		{"the folder itself", familyID, write("family/x", "x"), `{"path":"/workspace/group"}`, 403, "", "not a regular file"},
		{"over 50 MB", familyID, sparse("family/big", MaxSendFile+1), `{"path":"/workspace/group/big"}`, 403, "", "larger than 50 MB"},
		{"missing", familyID, write("family/x", "x"), `{"path":"/workspace/group/nothing"}`, 400, "", "no file at"},
		{"no path", familyID, nil, `{}`, 400, "", "path is required"},
		{"identity in the body", familyID, nil, `{"path":"/workspace/group/a","group":"main"}`, 400, "", "unknown field"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, st := setup(t)
			if c.prep != nil {
				c.prep(t, h.cfg.GroupsDir)
			}
			status, body := ask(t, h, c.id, "send_file", c.body)
			assert.Equal(t, c.status, status, body)
			pending, err := st.PendingOutbox(context.Background())
			require.NoError(t, err)
			if c.status != 200 {
				assert.Contains(t, body, c.errSub)
				assert.Empty(t, pending, "nothing queued")
				if c.status == 403 {
					assert.Contains(t, auditText(t, st), "deny", "the refusal is audited")
				}
				return
			}
			require.Len(t, pending, 1)
			assert.Equal(t, c.kind, pending[0].Kind)
			data, err := st.OutboxFile(context.Background(), pending[0].ID)
			require.NoError(t, err)
			assert.NotNil(t, data)
		})
	}
}

// The bytes are copied when the agent asks: a later change of the file is
// not what is sent.
func TestSendFileCopiesAtOnce(t *testing.T) {
	h, st := setup(t)
	write("family/a.txt", "first")(t, h.cfg.GroupsDir)
	status, body := ask(t, h, familyID, "send_file", `{"path":"/workspace/group/a.txt"}`)
	require.Equal(t, 200, status, body)
	require.NoError(t, os.WriteFile(filepath.Join(h.cfg.GroupsDir, "family/a.txt"), []byte("second"), 0o644))
	pending, err := st.PendingOutbox(context.Background())
	require.NoError(t, err)
	require.Len(t, pending, 1)
	data, err := st.OutboxFile(context.Background(), pending[0].ID)
	require.NoError(t, err)
	assert.Equal(t, "first", string(data))
	assert.Equal(t, "a.txt", pending[0].FileName)
}

func TestFileName(t *testing.T) {
	for in, want := range map[string]string{
		"/workspace/group/a.txt":                                     "a.txt",
		"/workspace/group/a\nb.txt":                                  "a_b.txt",
		"/workspace/group/x\u202etxt.exe":                            "x_txt.exe",
		"/workspace/group/" + string(bytes.Repeat([]byte("é"), 100)): string(bytes.Repeat([]byte("é"), 64)),
	} {
		assert.Equal(t, want, fileName(in), "%q", in)
	}
}

func write(rel, content string) func(t *testing.T, groups string) {
	return func(t *testing.T, groups string) {
		p := filepath.Join(groups, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
}

func link(target, rel string) func(t *testing.T, groups string) {
	return func(t *testing.T, groups string) {
		p := filepath.Join(groups, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.Symlink(target, p))
	}
}

func linkIn(targetRel, rel string) func(t *testing.T, groups string) {
	return func(t *testing.T, groups string) { link(filepath.Join(groups, targetRel), rel)(t, groups) }
}

func fifo(rel string) func(t *testing.T, groups string) {
	return func(t *testing.T, groups string) {
		p := filepath.Join(groups, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, syscall.Mkfifo(p, 0o644))
	}
}

func sparse(rel string, size int64) func(t *testing.T, groups string) {
	return func(t *testing.T, groups string) {
		write(rel, "")(t, groups)
		require.NoError(t, os.Truncate(filepath.Join(groups, rel), size))
	}
}

func both(fs ...func(t *testing.T, groups string)) func(t *testing.T, groups string) {
	return func(t *testing.T, groups string) {
		for _, f := range fs {
			f(t, groups)
		}
	}
}

// auditText is the audit log as one text.
func auditText(t *testing.T, st interface {
	AuditLog(context.Context, int) ([]domain.AuditEntry, error)
}) string {
	t.Helper()
	es, err := st.AuditLog(context.Background(), 100)
	require.NoError(t, err)
	var b bytes.Buffer
	for _, e := range es {
		b.WriteString(e.Operation + " " + e.Decision + " " + e.Reason + "\n")
	}
	return b.String()
}

// An extra mount is reachable as the sandbox sees it: as the allowlist
// allows it now, without its masked entries, through no symlink.
func TestSendFileFromExtraMount(t *testing.T) {
	h, st := setup(t)
	root := t.TempDir()
	share := filepath.Join(root, "share")
	write("doc.txt", "shared doc")(t, share)
	write(".env", "SECRET=1")(t, share)
	link("/etc/passwd", "link")(t, share)
	allow := filepath.Join(root, "allowlist.json")
	require.NoError(t, os.WriteFile(allow, []byte(`{"allowedRoots":[{"path":"`+share+`","allowReadWrite":false}]}`), 0o644))
	h.cfg.Mounts = mounts.NewPolicy(mounts.PolicyConfig{Allowlist: allow, DataDir: filepath.Join(root, "data"), GroupsDir: h.cfg.GroupsDir}, slog.New(slog.DiscardHandler))
	require.NoError(t, st.PutGroup(context.Background(), domain.Group{ChatID: -100, Name: "Family", Folder: "family",
		Mounts: []domain.MountRequest{{HostPath: share, ContainerPath: "share", ReadOnly: true}}}))

	for _, c := range []struct {
		path   string
		status int
		errSub string
	}{
		{"/workspace/extra/share/doc.txt", 200, ""},
		{"/workspace/extra/share/.env", 403, "hidden from the sandbox"},
		{"/workspace/extra/share/link", 403, "symlink"},
		{"/workspace/extra/share/../share/doc.txt", 200, ""},
		{"/workspace/extra/share", 403, "not a regular file"},
		{"/workspace/extra/nope/doc.txt", 403, "no extra mount"},
		{"/workspace/extra", 403, "only files under"},
	} {
		status, body := ask(t, h, familyID, "send_file", `{"path":"`+c.path+`"}`)
		assert.Equal(t, c.status, status, "%s: %s", c.path, body)
		assert.Contains(t, body, c.errSub, c.path)
	}
	// Another group has no such mount.
	status, body := ask(t, h, domain.Caller{Group: "work", ChatID: -200, Run: "run-work"}, "send_file", `{"path":"/workspace/extra/share/doc.txt"}`)
	assert.Equal(t, 403, status, body)
}

// BenchmarkSendFile20MB is send_file's cost on the host: open, read and
// copy into the store.
func BenchmarkSendFile20MB(b *testing.B) {
	h, st := setup(b)
	p := filepath.Join(h.cfg.GroupsDir, "family", "big.bin")
	require.NoError(b, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(b, os.WriteFile(p, bytes.Repeat([]byte("x"), 20<<20), 0o644))
	b.SetBytes(20 << 20)
	for b.Loop() {
		status, body := h.Handle(context.Background(), familyID, "send_file", []byte(`{"path":"/workspace/group/big.bin"}`))
		if status != 200 {
			b.Fatalf("%d %v", status, body)
		}
		pending, err := st.PendingOutbox(context.Background())
		require.NoError(b, err)
		for _, o := range pending {
			require.NoError(b, st.MarkSent(context.Background(), o.ID))
		}
	}
}

// send_file reads with the sandbox user's rights, not the host's: what the
// sandbox cannot read at a path (a root-only file, a file in a root-only
// directory whose name it guesses, a file only root's group may read) is
// refused as denied and audited, in its folder and in an extra mount, also
// when the mount is one file; what it can read is sent.
func TestSendFileOnlyWhatTheSandboxCanRead(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: a host that is not root runs its sandboxes as itself")
	}
	sandboxUser := beneath.User{UID: 4713, GID: 4714} // any ids a root host can take
	h, st := setup(t)
	h.cfg.SandboxUser = sandboxUser
	root := t.TempDir()
	share := filepath.Join(root, "share")
	for _, f := range []struct {
		path       string
		mode       os.FileMode
		sandboxOwn bool
	}{
		{filepath.Join(h.cfg.GroupsDir, "family/mine.txt"), 0o600, true},
		{filepath.Join(h.cfg.GroupsDir, "family/root-only.txt"), 0o600, false},
		{filepath.Join(h.cfg.GroupsDir, "family/root-group.txt"), 0o640, false},
		{filepath.Join(h.cfg.GroupsDir, "family/private/inner.txt"), 0o644, false},
		{filepath.Join(share, "public.txt"), 0o644, false},
		{filepath.Join(share, "secret.txt"), 0o600, false},
		{filepath.Join(share, "private/inner.txt"), 0o644, false},
		{filepath.Join(root, "single.txt"), 0o644, false},
		{filepath.Join(root, "single-secret.txt"), 0o600, false},
	} {
		require.NoError(t, os.MkdirAll(filepath.Dir(f.path), 0o755))
		require.NoError(t, os.WriteFile(f.path, []byte("CONTENT of "+f.path), f.mode))
		require.NoError(t, os.Chmod(f.path, f.mode))
		if f.sandboxOwn {
			require.NoError(t, os.Chown(f.path, sandboxUser.UID, sandboxUser.GID))
		}
	}
	// The folder is the sandbox user's, as after any run; its private/ and
	// share/private/ are root's, 0700.
	require.NoError(t, os.Chown(filepath.Join(h.cfg.GroupsDir, "family"), sandboxUser.UID, sandboxUser.GID))
	require.NoError(t, os.Chmod(filepath.Join(h.cfg.GroupsDir, "family/private"), 0o700))
	require.NoError(t, os.Chmod(filepath.Join(share, "private"), 0o700))
	allow := filepath.Join(root, "allowlist.json")
	require.NoError(t, os.WriteFile(allow, []byte(`{"allowedRoots":[{"path":"`+root+`","allowReadWrite":false}]}`), 0o644))
	h.cfg.Mounts = mounts.NewPolicy(mounts.PolicyConfig{Allowlist: allow, DataDir: filepath.Join(root, "data"), GroupsDir: h.cfg.GroupsDir}, slog.New(slog.DiscardHandler))
	require.NoError(t, st.PutGroup(context.Background(), domain.Group{ChatID: -100, Name: "Family", Folder: "family",
		Mounts: []domain.MountRequest{
			{HostPath: share, ContainerPath: "share", ReadOnly: true},
			{HostPath: filepath.Join(root, "single.txt"), ContainerPath: "single", ReadOnly: true},
			{HostPath: filepath.Join(root, "single-secret.txt"), ContainerPath: "single-secret", ReadOnly: true},
		}}))

	sent := 0
	for _, c := range []struct {
		path   string
		status int
		errSub string
	}{
		{"/workspace/group/mine.txt", 200, ""},
		{"/workspace/group/root-only.txt", 403, "cannot be read by the sandbox"},
		{"/workspace/group/root-group.txt", 403, "cannot be read by the sandbox"},
		{"/workspace/group/private/inner.txt", 403, "cannot be read by the sandbox"},
		{"/workspace/extra/share/public.txt", 200, ""},
		{"/workspace/extra/share/secret.txt", 403, "cannot be read by the sandbox"},
		{"/workspace/extra/share/private/inner.txt", 403, "cannot be read by the sandbox"},
		{"/workspace/extra/single", 200, ""},
		{"/workspace/extra/single-secret", 403, "cannot be read by the sandbox"},
		{"/workspace/extra/single/below", 400, "no file at"},
	} {
		status, body := ask(t, h, familyID, "send_file", `{"path":"`+c.path+`"}`)
		assert.Equal(t, c.status, status, "%s: %s", c.path, body)
		assert.Contains(t, body, c.errSub, c.path)
		if status == 200 {
			sent++
		}
	}
	pending, err := st.PendingOutbox(context.Background())
	require.NoError(t, err)
	assert.Len(t, pending, sent, "only what the sandbox can read is queued")
	for _, o := range pending {
		data, err := st.OutboxFile(context.Background(), o.ID)
		require.NoError(t, err)
		assert.NotContains(t, string(data), "secret", o.FileName)
		assert.NotContains(t, string(data), "root-", o.FileName)
		assert.NotContains(t, string(data), "inner", o.FileName)
	}
	assert.Equal(t, 6, strings.Count(auditText(t, st), "send_file deny"), "each refusal is audited")

	// The host's own rights are back: the thread pool was not left changed.
	for range 20 {
		_, err := os.ReadFile(filepath.Join(h.cfg.GroupsDir, "family/root-only.txt"))
		require.NoError(t, err)
	}
}

// A mount of one file (not a directory) is sent like a file of a mounted
// directory, as the sandbox sees it at /workspace/extra/<name>.
func TestSendFileFromASingleFileMount(t *testing.T) {
	h, st := setup(t)
	root := t.TempDir()
	file := filepath.Join(root, "notes.txt")
	require.NoError(t, os.WriteFile(file, []byte("single-file mount"), 0o644))
	allow := filepath.Join(root, "allowlist.json")
	require.NoError(t, os.WriteFile(allow, []byte(`{"allowedRoots":[{"path":"`+root+`","allowReadWrite":false}]}`), 0o644))
	h.cfg.Mounts = mounts.NewPolicy(mounts.PolicyConfig{Allowlist: allow, DataDir: filepath.Join(root, "data"), GroupsDir: h.cfg.GroupsDir}, slog.New(slog.DiscardHandler))
	require.NoError(t, st.PutGroup(context.Background(), domain.Group{ChatID: -100, Name: "Family", Folder: "family",
		Mounts: []domain.MountRequest{{HostPath: file, ContainerPath: "notes", ReadOnly: true}}}))

	status, body := ask(t, h, familyID, "send_file", `{"path":"/workspace/extra/notes"}`)
	require.Equal(t, 200, status, body)
	pending, err := st.PendingOutbox(context.Background())
	require.NoError(t, err)
	require.Len(t, pending, 1)
	data, err := st.OutboxFile(context.Background(), pending[0].ID)
	require.NoError(t, err)
	assert.Equal(t, "single-file mount", string(data))
	assert.Equal(t, "notes", pending[0].FileName)

	status, body = ask(t, h, familyID, "send_file", `{"path":"/workspace/extra/notes/x"}`)
	assert.Equal(t, 400, status, body)
	assert.Contains(t, body, "no file at")
}
