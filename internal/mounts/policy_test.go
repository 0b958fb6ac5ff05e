package mounts

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
)

func mountFixture(t *testing.T, nonMainReadOnly bool) (*Policy, string, string) {
	t.Helper()
	root := t.TempDir()
	shared := filepath.Join(root, "shared")
	for _, d := range []string{"project/sub", "project/.git", "project/app"} {
		require.NoError(t, os.MkdirAll(filepath.Join(shared, d), 0o755))
	}
	for name, body := range map[string]string{"project/.env": "SECRET", "project/.git/credentials": "tok", "project/notes.txt": "hi", "project/app/id_rsa": "key"} {
		require.NoError(t, os.WriteFile(filepath.Join(shared, name), []byte(body), 0o600))
	}
	require.NoError(t, os.Symlink(".env", filepath.Join(shared, "project", "config.env")))
	allow := filepath.Join(root, "allowlist.json")
	require.NoError(t, os.WriteFile(allow, []byte(fmt.Sprintf(`{"allowedRoots":[{"path":%q,"allowReadWrite":true}],"blockedPatterns":["password"],"nonMainReadOnly":%v}`, shared, nonMainReadOnly)), 0o600))
	cfg := PolicyConfig{Allowlist: allow, DataDir: filepath.Join(root, "data"), GroupsDir: filepath.Join(root, "groups")}
	return NewPolicy(cfg, slog.New(slog.DiscardHandler)), shared, allow
}

func TestResolveMasksAndWritePaths(t *testing.T) {
	p, shared, _ := mountFixture(t, false)
	g := domain.Group{Folder: "family", Mounts: []domain.MountRequest{
		{HostPath: filepath.Join(shared, "project"), ContainerPath: "proj", ReadOnly: true, WritePaths: []string{"sub", "../escape", ".git"}},
		{HostPath: filepath.Join(shared, "project", ".env"), ContainerPath: "env", ReadOnly: true},
	}}
	ms, refused := p.Resolve(g)
	require.Len(t, ms, 1)
	m := ms[0]
	assert.True(t, m.ReadOnly)
	// .git may be written; the masked credentials inside it stay hidden
	// (masks are bound after write paths).
	assert.Equal(t, []string{filepath.Join(shared, "project", "sub"), filepath.Join(shared, "project", ".git")}, m.Writable)
	assert.ElementsMatch(t, []string{
		filepath.Join(shared, "project", ".env"),
		filepath.Join(shared, "project", ".git", "credentials"),
		filepath.Join(shared, "project", "app", "id_rsa"),
		filepath.Join(shared, "project", ".env"), // config.env -> .env: its target is hidden
	}, m.Masks)
	var rules []string
	for _, r := range refused {
		rules = append(rules, r.Rule)
	}
	assert.Equal(t, []string{"write-path", "blocked-pattern"}, rules, "../escape as a write path, and the .env mount")
}

func TestResolveFollowsAllowlistChangesAndFailsClosed(t *testing.T) {
	p, shared, allow := mountFixture(t, true)
	g := domain.Group{Folder: "family", Mounts: []domain.MountRequest{{HostPath: filepath.Join(shared, "project"), ContainerPath: "proj"}}}
	ms, refused := p.Resolve(g)
	require.Len(t, ms, 1)
	assert.Empty(t, refused)

	// A malformed file: no extra mounts at all, and the reason says so.
	require.NoError(t, os.WriteFile(allow, []byte(`{"allowedRoots": [`), 0o600))
	future := time.Now().Add(time.Minute)
	require.NoError(t, os.Chtimes(allow, future, future))
	ms, refused = p.Resolve(g)
	assert.Empty(t, ms)
	require.Len(t, refused, 1)
	assert.Contains(t, refused[0].Reason, "malformed")

	// Gone: no extra mounts either.
	require.NoError(t, os.Remove(allow))
	ms, refused = p.Resolve(g)
	assert.Empty(t, ms)
	require.Len(t, refused, 1)
	assert.Contains(t, refused[0].Reason, "no mount allowlist")
}

func TestWritePathsNeedReadWriteRights(t *testing.T) {
	p, shared, _ := mountFixture(t, true) // nonMainReadOnly
	g := domain.Group{Folder: "family", Mounts: []domain.MountRequest{{HostPath: filepath.Join(shared, "project"), ContainerPath: "proj", ReadOnly: true, WritePaths: []string{"sub"}}}}
	ms, refused := p.Resolve(g)
	require.Len(t, ms, 1)
	assert.Empty(t, ms[0].Writable)
	require.Len(t, refused, 1)
	assert.Equal(t, "write-path", refused[0].Rule)

	g.Folder = domain.MainFolder // main is not bound by nonMainReadOnly
	ms, refused = p.Resolve(g)
	require.Len(t, ms, 1)
	assert.Len(t, ms[0].Writable, 1)
	assert.Empty(t, refused)
}

// TestResolveMasksFailsClosedOnASwappedParent: a masked entry whose parent
// was swapped for a symlink after the listing fails the mount: once swapped
// back, the sandbox would see the real entry unmasked. One that is simply
// gone needs no mask.
func TestResolveMasksFailsClosedOnASwappedParent(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "elsewhere", "app"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "elsewhere", "app", "id_rsa"), nil, 0o600))
	require.NoError(t, os.Symlink(filepath.Join(root, "elsewhere"), filepath.Join(root, "project")))

	_, err := resolveMasks(filepath.Join(root, "project"), []string{"app/id_rsa"})
	require.Error(t, err)

	got, err := resolveMasks(filepath.Join(root, "elsewhere"), []string{"gone/.env", "app/id_rsa"})
	require.NoError(t, err)
	assert.Equal(t, []string{filepath.Join(root, "elsewhere", "app", "id_rsa")}, got)
}

// A host in a container (CLAWPEN_HOST_ROOT) grants only mounts under its
// root, the tree it shares with the Docker engine; the refusal names both.
func TestResolveConfinesAHostInAContainerToItsRoot(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	app, outside := filepath.Join(root, "app"), filepath.Join(root, "outside")
	for _, d := range []string{"app/projects/shared", "outside"} {
		require.NoError(t, os.MkdirAll(filepath.Join(root, d), 0o755))
	}
	allow := filepath.Join(app, "allowlist.json")
	require.NoError(t, os.WriteFile(allow, []byte(fmt.Sprintf(`{"allowedRoots":[{"path":%q},{"path":%q}]}`, app, outside)), 0o600))
	cfg := PolicyConfig{Allowlist: allow, DataDir: filepath.Join(app, "data"), GroupsDir: filepath.Join(app, "groups"),
		Root: app, HostRoot: "/srv/clawpen"}
	p := NewPolicy(cfg, slog.New(slog.DiscardHandler))
	// A non-main group: the root is the container's working directory, but
	// not protected as the project (that would leave no mount to any group).
	g := domain.Group{Folder: "family", Mounts: []domain.MountRequest{
		{HostPath: filepath.Join(app, "projects", "shared"), ContainerPath: "shared", ReadOnly: true},
		{HostPath: outside, ContainerPath: "outside", ReadOnly: true},
		{HostPath: app, ContainerPath: "all", ReadOnly: true},
	}}
	t.Chdir(app)
	ms, refused := NewPolicy(cfg, slog.New(slog.DiscardHandler)).Resolve(g)
	require.Len(t, ms, 1)
	assert.Equal(t, filepath.Join(app, "projects", "shared"), ms[0].HostPath)
	require.Len(t, refused, 2)
	assert.Equal(t, "not-bindable", refused[0].Rule)
	assert.Contains(t, refused[0].Reason, "outside "+app+" (CLAWPEN_ROOT: this host runs in a container")
	assert.Contains(t, refused[0].Reason, "/srv/clawpen (CLAWPEN_HOST_ROOT)")
	assert.Equal(t, "protected", refused[1].Rule, "the whole root is no mount")
	require.Error(t, p.CheckRequests(g.Mounts[1:2], true), "configuring it is refused too")

	// On the Docker host itself main is granted both.
	cfg.Root, cfg.HostRoot = "", ""
	g.Folder, g.Mounts = "main", g.Mounts[:2]
	ms, refused = NewPolicy(cfg, slog.New(slog.DiscardHandler)).Resolve(g)
	assert.Len(t, ms, 2)
	assert.Empty(t, refused)
}
