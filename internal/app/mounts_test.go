package app

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/config"
	"github.com/clawpen/clawpen/internal/domain"
)

func mountFixture(t *testing.T, nonMainReadOnly bool) (*MountPolicy, string, string) {
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
	cfg := config.Config{MountAllowlist: allow, DataDir: filepath.Join(root, "data"), GroupsDir: filepath.Join(root, "groups")}
	return NewMountPolicy(cfg, slog.New(slog.DiscardHandler)), shared, allow
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
