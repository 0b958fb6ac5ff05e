package mounts

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMasks(t *testing.T) {
	tr := newTree(t)
	al := tr.load(t, sampleJSON)
	touch(t, filepath.Join(tr.app, ".ssh", "keys", "id_ed25519"), // inside a masked dir: not listed
		filepath.Join(tr.app, "src", "deep", "prod.ENV"),
		filepath.Join(tr.app, "src", "notes-secret.md"), // the file's own pattern
		filepath.Join(tr.app, "src", "ok.txt"))
	link(t, "../.env", filepath.Join(tr.app, "src", ".env.link")) // symlink with a blocked name
	link(t, "/nonexistent/x", filepath.Join(tr.app, "src", "credentials-dangling"))
	socket(t, filepath.Join(tr.app, "src", "docker.sock"))

	got, err := Masks(tr.app, al, 0)
	require.NoError(t, err)
	// link-out -> <base>/outside holds a .env, but symlinks are not followed.
	assert.Equal(t, []string{
		".env",
		".git/credentials",
		".ssh",
		"id_rsa",
		"src/.env.link",
		"src/credentials-dangling",
		"src/deep/prod.ENV",
		"src/docker.sock",
		"src/notes-secret.md",
	}, got)

	got, err = Masks(filepath.Join(tr.app, "src", "main.go"), al, 0)
	require.NoError(t, err)
	assert.Empty(t, got, "a file root has nothing to mask")

	got, err = Masks(filepath.Join(tr.projects, "passwords"), al, 0)
	require.NoError(t, err)
	assert.Empty(t, got, "only entries below the root are masked; Validate judges the root")
}

func TestMasksProtectedInsideRoot(t *testing.T) {
	tr := newTree(t)
	al := tr.load(t, sampleJSON)
	project := filepath.Join(tr.projects, "clawpen")
	require.NoError(t, al.Protect(filepath.Join(project, "data"), "the data dir", ProtectAll))
	require.NoError(t, al.Protect(project, "the clawpen project", ProtectNonMain))

	got, err := Masks(project, al, 0)
	require.NoError(t, err)
	assert.Equal(t, []string{".env", "data"}, got)

	// Through a symlinked spelling of the protected path, as resolved.
	al2 := tr.load(t, sampleJSON)
	require.NoError(t, al2.Protect(filepath.Join(tr.home, "rootlink", "clawpen", "data"), "the data dir", ProtectAll))
	got, err = Masks(tr.projects, al2, 0)
	require.NoError(t, err)
	assert.Contains(t, got, "clawpen/data")
	assert.Contains(t, got, "clawpen/.env")
	assert.NotContains(t, got, "clawpen/data/sessions")
}

func TestMasksCap(t *testing.T) {
	tr := newTree(t)
	al := tr.load(t, sampleJSON)
	dir := filepath.Join(tr.notes, "many")
	mk(t, dir)
	for i := range 50 {
		touch(t, filepath.Join(dir, "f"+strconv.Itoa(i)))
	}
	_, err := Masks(tr.notes, al, 50)
	require.ErrorIs(t, err, ErrTooManyEntries)

	got, err := Masks(tr.notes, al, 51) // "many" and its 50 files
	require.NoError(t, err)
	assert.Empty(t, got)
}

func TestMasksUnreadableFailsClosed(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads every directory")
	}
	tr := newTree(t)
	al := tr.load(t, sampleJSON)
	locked := filepath.Join(tr.notes, "locked")
	mk(t, locked)
	require.NoError(t, os.Chmod(locked, 0))
	t.Cleanup(func() { _ = os.Chmod(locked, 0o755) })
	_, err := Masks(tr.notes, al, 0)
	require.Error(t, err)
}

func TestMasksMissingRoot(t *testing.T) {
	_, err := Masks(filepath.Join(t.TempDir(), "gone"), Allowlist{}, 0)
	require.Error(t, err)
}

// TestMasksNewDefaults: every later built-in pattern is masked inside a
// mounted tree, the multi-component one by the whole path, root included.
func TestMasksNewDefaults(t *testing.T) {
	tr := newTree(t)
	al := tr.load(t, sampleJSON)
	proj := filepath.Join(tr.notes, "proj")
	secrets := []string{"id_ecdsa", "id_dsa", ".pgpass", "tls/server.key", "tls/ca.pem", "tls/old.pem.bak",
		".vault-token", ".git-credentials", ".pypirc", ".s3cfg", "kubeconfig", "infra/terraform.tfstate",
		".config/gh/hosts.yml"}
	for _, s := range secrets {
		touch(t, filepath.Join(proj, s))
	}
	touch(t, filepath.Join(proj, ".config", "gh", "config.yml"), filepath.Join(proj, "tls", "README"),
		filepath.Join(proj, "my.keyboard"), filepath.Join(proj, "hosts.yml"))

	got, err := Masks(proj, al, 0)
	require.NoError(t, err)
	assert.ElementsMatch(t, secrets, got)

	// A mount of ~/.config/gh itself: hosts.yml is masked by its full path.
	got, err = Masks(filepath.Join(proj, ".config", "gh"), al, 0)
	require.NoError(t, err)
	assert.Equal(t, []string{"hosts.yml"}, got)
}

// TestMasksRefusesASymlinkAboveTheRoot: a mount root, resolved by Validate,
// whose parent was swapped for a symlink since (to another tree, to /etc),
// is not listed: the listing would describe the symlink's target, and the
// real tree's secrets would go unmasked. The mount is then refused.
func TestMasksRefusesASymlinkAboveTheRoot(t *testing.T) {
	tr := newTree(t)
	al := tr.load(t, sampleJSON)
	touch(t, filepath.Join(tr.outside, "deep", ".env"))
	for _, root := range []string{filepath.Join(tr.app, "link-out", "deep"), filepath.Join(tr.app, "link-etc", "ssl")} {
		got, err := Masks(root, al, 0)
		require.ErrorIs(t, err, syscall.ELOOP, root)
		assert.Empty(t, got, root)
	}
	// A root that is itself a symlink is refused too, not taken for a file.
	_, err := Masks(filepath.Join(tr.app, "link-out"), al, 0)
	require.ErrorIs(t, err, syscall.ELOOP)
}
