package router

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/beneath"
	"github.com/clawpen/clawpen/internal/domain"
)

// What a group could set up in its own folder to make the host's inbox
// pruning delete something else: the inbox, or the group's folder, swapped
// for a symlink to another group's folder; an old-named symlink to a host
// file; an old-named directory. Only the group's own old files go.
func TestPruneInbox(t *testing.T) {
	root := t.TempDir()
	groups := filepath.Join(root, "groups")
	cutoff := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	mk := func(p, content string) string {
		t.Helper()
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
		return p
	}
	otherOld := mk(filepath.Join(groups, "other", "inbox", "20000101-000000-5.txt"), "other's")
	otherTop := mk(filepath.Join(groups, "other", "20000101-000000-6.txt"), "other's")
	hostFile := mk(filepath.Join(root, "host", "20000101-000000-7.txt"), "host's")

	own := filepath.Join(groups, "fam", "inbox")
	oldFile := mk(filepath.Join(own, "20000101-000000-1.jpg"), "old")
	newFile := mk(filepath.Join(own, "20990101-000000-2.jpg"), "new")
	otherName := mk(filepath.Join(own, "notes-20000101.txt"), "not ours")
	partial := mk(filepath.Join(own, ".20000101-000000-9.jpg.part"), "being written")
	oldDir := mk(filepath.Join(own, "20000101-000000-4.txt", "inside"), "dir")
	link := filepath.Join(own, "20000101-000000-3.txt")
	require.NoError(t, os.Symlink(hostFile, link))

	// The inbox, or the whole group folder, is a symlink to another's.
	require.NoError(t, os.MkdirAll(filepath.Join(groups, "evil"), 0o755))
	require.NoError(t, os.Symlink(filepath.Join(groups, "other", "inbox"), filepath.Join(groups, "evil", "inbox")))
	require.NoError(t, os.Symlink(filepath.Join(groups, "other"), filepath.Join(groups, "evil2")))
	require.NoError(t, os.Symlink(filepath.Join(root, "host"), filepath.Join(groups, "evil3")))

	require.NoError(t, os.MkdirAll(filepath.Join(groups, "empty"), 0o755))
	tests := []struct {
		name    string
		folder  string
		removed int
		wantErr bool
	}{
		{"own inbox", filepath.Join(groups, "fam"), 2, false},
		{"inbox is a symlink to another group's", filepath.Join(groups, "evil"), 0, true},
		{"group folder is a symlink to another group's", filepath.Join(groups, "evil2"), 0, true},
		{"group folder is a symlink to a host directory", filepath.Join(groups, "evil3"), 0, true},
		{"no inbox", filepath.Join(groups, "empty"), 0, false},
		{"no folder", filepath.Join(groups, "none"), 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := PruneInbox(beneath.User{}, tt.folder, cutoff)
			if tt.wantErr {
				require.Error(t, err)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tt.removed, n)
		})
	}
	for _, p := range []string{otherOld, otherTop, hostFile, newFile, otherName, partial, oldDir} {
		assert.FileExists(t, p)
	}
	assert.NoFileExists(t, oldFile)
	_, err := os.Lstat(link)
	assert.True(t, os.IsNotExist(err), "the old-named symlink itself is removed")
}

// The prune removes with the sandbox user's rights: what the sandbox could
// not remove from its folder (an inbox that is root's, 0755) stays; its own
// old files go.
func TestPruneInboxWithTheSandboxUsersRights(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: a host that is not root acts with its own rights")
	}
	u := beneath.User{UID: 4713, GID: 4714}
	cutoff := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	groups := filepath.Join(t.TempDir(), "groups")
	for _, g := range []string{"mine", "roots"} {
		require.NoError(t, os.MkdirAll(filepath.Join(groups, g, "inbox"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(groups, g, "inbox", "20000101-000000-1.jpg"), []byte("old"), 0o644))
		require.NoError(t, os.Chown(filepath.Join(groups, g), u.UID, u.GID))
	}
	for _, p := range []string{"mine/inbox", "mine/inbox/20000101-000000-1.jpg"} {
		require.NoError(t, os.Chown(filepath.Join(groups, p), u.UID, u.GID))
	}

	n, err := PruneInbox(u, filepath.Join(groups, "mine"), cutoff)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.NoFileExists(t, filepath.Join(groups, "mine", "inbox", "20000101-000000-1.jpg"))

	n, _ = PruneInbox(u, filepath.Join(groups, "roots"), cutoff)
	assert.Equal(t, 0, n)
	assert.FileExists(t, filepath.Join(groups, "roots", "inbox", "20000101-000000-1.jpg"), "root's inbox is not the sandbox's to prune")
}

// Every name inboxName makes is one the prune reads back, at its time;
// nothing else is.
func TestInboxTime(t *testing.T) {
	at := time.Date(2024, 1, 31, 23, 59, 59, 0, time.UTC)
	made := inboxName(domain.Inbound{Time: at, MessageID: 42}, &domain.InFile{Name: "Report.PDF", Type: "document"})
	got, ok := inboxTime(made)
	require.True(t, ok, made)
	assert.Equal(t, at, got)

	for _, name := range []string{"20240131-235959-42", "20240131-235959-.jpg", "20240131-235959-4x.jpg",
		"20240132-000000-1.jpg", "20240131-235959-1.JPG", "x20240131-235959-1.jpg", "20240131-235959-1.jpg/..",
		".20240131-235959-1.jpg.part", "20240131-235959-1.tar.gz"} {
		_, ok := inboxTime(name)
		assert.False(t, ok, name)
	}
}
