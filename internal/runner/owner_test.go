package runner

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/mounts"
	"github.com/clawpen/clawpen/internal/sandbox"
)

// planter stands in for a sandbox that leaves setuid, setgid and
// world-writable entries in every tree it may write, then fails. With a
// uid, what it plants is that user's, as a sandbox's is the sandbox user's.
type planter struct{ uid, gid int }

func (planter) Name() string { return "planter" }

func (pl planter) Run(_ context.Context, sp sandbox.Spec) (sandbox.Result, error) {
	dirs := []string{sp.GroupDir, sp.SessionDir}
	if sp.GlobalWritable {
		dirs = append(dirs, sp.GlobalDir)
	}
	for _, m := range sp.Extra {
		if !m.ReadOnly {
			dirs = append(dirs, m.HostPath)
		}
	}
	for _, d := range dirs {
		if err := os.WriteFile(filepath.Join(d, "suid"), []byte("x"), 0o755); err != nil {
			return sandbox.Result{}, err
		}
		if err := os.Mkdir(filepath.Join(d, "open"), 0o755); err != nil {
			return sandbox.Result{}, err
		}
		for p, m := range map[string]uint32{"suid": 0o4755 | 0o2000, "open": 0o777} {
			if pl.uid > 0 {
				if err := os.Lchown(filepath.Join(d, p), pl.uid, pl.gid); err != nil {
					return sandbox.Result{}, err
				}
			}
			if err := syscall.Chmod(filepath.Join(d, p), m); err != nil {
				return sandbox.Result{}, err
			}
		}
	}
	_, _ = io.WriteString(sp.Stdout, `{"type":"error","error":"planted"}`+"\n")
	return sandbox.Result{ExitCode: 1}, nil
}

// allowing is a mount policy whose allowlist (in dir) grants root
// read-write to every group.
func allowing(t *testing.T, dir, root string) *mounts.Policy {
	t.Helper()
	allow := filepath.Join(dir, "allowlist.json")
	body := fmt.Sprintf(`{"allowedRoots":[{"path":%q,"allowReadWrite":true}],"nonMainReadOnly":false}`, root)
	require.NoError(t, os.WriteFile(allow, []byte(body), 0o600))
	return mounts.NewPolicy(mounts.PolicyConfig{Allowlist: allow, DataDir: dir + "/data", GroupsDir: dir + "/groups"}, slog.New(slog.DiscardHandler))
}

func modeOf(t *testing.T, p string) uint32 {
	t.Helper()
	var st syscall.Stat_t
	require.NoError(t, syscall.Lstat(p, &st))
	return st.Mode & 0o7777
}

// TestStripAfterFailedRun: whatever the run's outcome, the trees it could
// write hold no setuid, setgid or world-writable entry afterwards.
func TestStripAfterFailedRun(t *testing.T) {
	dir := t.TempDir()
	extra := filepath.Join(dir, "project")
	require.NoError(t, os.Mkdir(extra, 0o755))
	r := New(Config{GroupsDir: dir + "/groups", DataDir: dir + "/data", RunAsUID: -1, RunAsGID: -1, Mounts: allowing(t, dir, extra)}, planter{})
	main := domain.Group{Folder: domain.MainFolder, ChatID: 1, Mounts: []domain.MountRequest{{HostPath: extra, ContainerPath: "project"}}}
	_, err := r.Start(context.Background(), Request{Group: main}).Wait()
	require.ErrorContains(t, err, "planted")
	for _, d := range []string{"groups/main", "groups/global", "data/sessions/main", "project"} {
		assert.Equal(t, uint32(0o755), modeOf(t, filepath.Join(dir, d, "suid")), d)
		assert.Equal(t, uint32(0o775), modeOf(t, filepath.Join(dir, d, "open")), d)
	}
}

// TestStripOnlyWhatTheSandboxCouldChange: the strip after a run changes the
// sandbox user's entries only, as the sandbox itself could: a setgid
// directory someone else left in the group's folder keeps its bit.
func TestStripOnlyWhatTheSandboxCouldChange(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: a host that is not root runs its sandboxes as itself")
	}
	const sbUID, sbGID = 4713, 4714
	dir := t.TempDir()
	folder := filepath.Join(dir, "groups", "team")
	require.NoError(t, os.MkdirAll(folder, 0o755))
	require.NoError(t, os.Chown(folder, sbUID, sbGID)) // after an earlier run: no hand-over
	theirs := filepath.Join(folder, "shared")
	require.NoError(t, os.Mkdir(theirs, 0o755))
	require.NoError(t, syscall.Chmod(theirs, 0o2775))
	r := New(Config{GroupsDir: dir + "/groups", DataDir: dir + "/data", RunAsUID: sbUID, RunAsGID: sbGID}, planter{sbUID, sbGID})
	_, err := r.Start(context.Background(), Request{Group: domain.Group{Folder: "team", ChatID: -5}}).Wait()
	require.ErrorContains(t, err, "planted")
	assert.Equal(t, uint32(0o755), modeOf(t, filepath.Join(folder, "suid")))
	assert.Equal(t, uint32(0o775), modeOf(t, filepath.Join(folder, "open")))
	assert.Equal(t, uint32(0o2775), modeOf(t, theirs), "not the sandbox's: left as it is")
}

// TestFolderOwnership: a root host gives the group's folder and session
// dir to the sandbox user, handing over what was there; groups/global only
// main's runs take, a non-main run never.
func TestFolderOwnership(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown needs root")
	}
	const sbUID, sbGID = 4713, 4714
	dir := t.TempDir()
	old := filepath.Join(dir, "groups", "team", "old.txt")
	require.NoError(t, os.MkdirAll(filepath.Dir(old), 0o755))
	require.NoError(t, os.WriteFile(old, []byte("from before"), 0o644))
	r := New(Config{GroupsDir: dir + "/groups", DataDir: dir + "/data", RunAsUID: sbUID, RunAsGID: sbGID}, planter{})
	owner := func(rel string) [2]uint32 {
		var st syscall.Stat_t
		require.NoError(t, syscall.Lstat(filepath.Join(dir, rel), &st))
		return [2]uint32{st.Uid, st.Gid}
	}
	sb := [2]uint32{sbUID, sbGID}

	_, _ = r.Start(context.Background(), Request{Group: domain.Group{Folder: "team", ChatID: -5}}).Wait()
	for _, p := range []string{"groups/team", "groups/team/old.txt", "data/sessions/team"} {
		assert.Equal(t, sb, owner(p), p)
	}
	assert.Equal(t, [2]uint32{0, 0}, owner("groups/global"), "a non-main run never takes groups/global")

	_, _ = r.Start(context.Background(), Request{Group: domain.Group{Folder: domain.MainFolder, ChatID: 1}}).Wait()
	assert.Equal(t, sb, owner("groups/global"), "main writes groups/global and owns it")
}

// TestEnsureDirRefusesASymlinkAboveIt: a group folder whose parent was
// swapped for a symlink (main's writable mount of the project holds the
// groups dir), to another group's folder or to /etc, is neither created
// nor handed over there.
func TestEnsureDirRefusesASymlinkAboveIt(t *testing.T) {
	base := t.TempDir()
	other := filepath.Join(base, "groups", "other")
	require.NoError(t, os.MkdirAll(filepath.Join(other, "sub"), 0o755))
	require.NoError(t, os.Symlink(other, filepath.Join(base, "tob")))
	require.NoError(t, os.Symlink("/etc", filepath.Join(base, "toetc")))
	var ssl syscall.Stat_t
	require.NoError(t, syscall.Lstat("/etc/ssl", &ssl))
	ownerOf := func(p string) [2]uint32 {
		var st syscall.Stat_t
		require.NoError(t, syscall.Lstat(p, &st))
		return [2]uint32{st.Uid, st.Gid}
	}
	before := ownerOf(filepath.Join(other, "sub"))

	// Against another group's folder: a new folder is not made there, an
	// existing one is not handed over.
	r := New(Config{GroupsDir: base, DataDir: base, RunAsUID: 4713, RunAsGID: 4714}, planter{})
	require.Error(t, r.ensureDir(context.Background(), filepath.Join(base, "tob", "new"), 0o755, true))
	assert.NoDirExists(t, filepath.Join(other, "new"))
	require.Error(t, r.ensureDir(context.Background(), filepath.Join(base, "tob", "sub"), 0o755, true))
	assert.Equal(t, before, ownerOf(filepath.Join(other, "sub")))

	// Against /etc: /etc/ssl exists and the sandbox user is taken to be its
	// owner, so nothing would change even if followed; only the refusal is
	// observed.
	r = New(Config{GroupsDir: base, DataDir: base, RunAsUID: int(ssl.Uid), RunAsGID: int(ssl.Gid)}, planter{})
	require.Error(t, r.ensureDir(context.Background(), filepath.Join(base, "toetc", "ssl"), 0o755, true))
}

// swapper stands in for a sandbox whose writable sub-path's parent is
// swapped for a symlink to another group's folder as it ends (a group
// sharing the mount, still running).
type swapper struct{ sub, other string }

func (swapper) Name() string { return "swapper" }

func (s swapper) Run(_ context.Context, sp sandbox.Spec) (sandbox.Result, error) {
	if err := os.Rename(s.sub, s.sub+".real"); err != nil {
		return sandbox.Result{}, err
	}
	if err := os.Symlink(s.other, s.sub); err != nil {
		return sandbox.Result{}, err
	}
	_, _ = io.WriteString(sp.Stdout, `{"type":"result","text":"ok"}`+"\n")
	return sandbox.Result{}, nil
}

// TestStripSwappedParent: the strip after a run does not
// follow a writable sub-path's parent swapped for a symlink into another
// group's folder: what is there keeps its bits.
func TestStripSwappedParent(t *testing.T) {
	dir := t.TempDir()
	project, other := filepath.Join(dir, "project"), filepath.Join(dir, "groups", "other")
	require.NoError(t, os.MkdirAll(filepath.Join(project, "sub", "w"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(other, "w"), 0o755))
	suid := filepath.Join(other, "w", "tool")
	require.NoError(t, os.WriteFile(suid, nil, 0o755))
	require.NoError(t, syscall.Chmod(suid, 0o4755))
	policy := allowing(t, dir, project)
	r := New(Config{GroupsDir: dir + "/groups", DataDir: dir + "/data", RunAsUID: -1, RunAsGID: -1, Mounts: policy},
		swapper{sub: filepath.Join(project, "sub"), other: other})
	team := domain.Group{Folder: "team", ChatID: -5, Mounts: []domain.MountRequest{
		{HostPath: project, ContainerPath: "project", ReadOnly: true, WritePaths: []string{"sub/w"}}}}
	ms, refused := policy.Resolve(team)
	require.Empty(t, refused)
	require.Len(t, ms, 1)
	require.Equal(t, []string{filepath.Join(project, "sub", "w")}, ms[0].Writable, "the run gets its writable sub-path")
	_, err := r.Start(context.Background(), Request{Group: team}).Wait()
	require.NoError(t, err)
	assert.Equal(t, uint32(0o4755), modeOf(t, suid), "another group's setuid file is not touched")
}
