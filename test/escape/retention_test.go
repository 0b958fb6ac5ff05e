package escape

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/test/harness"
)

// What a hostile group could set up for the host's pruning of old inbox
// files (CLAWPEN_RETENTION; the prune runs at the host's start, then
// hourly): old-named entries in its inbox that are a symlink to a host file
// or a directory, and its whole inbox swapped for a symlink to another
// group's. Each row plants from inside the group's sandbox, restarts the
// host so that it prunes, and records its outcome as retention-<name>.
// main's own old inbox file is the control: the prune must remove it, or
// the row cannot tell anything.
func TestRetentionEscape(t *testing.T) {
	h := harness.New(t, harness.Options{Owner: true, Extra: map[string]string{"CLAWPEN_RETENTION": "3650d"}})
	h.OwnerSays("hello")
	h.WaitFor(harness.OwnerID, "hello")
	h.RegisterGroup(t, "family")

	const old = "20000101-000000-" // 26 years ago: older than any retention
	write := func(p string) string {
		t.Helper()
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte("PRUNE-DECOY"), 0o644))
		return p
	}
	otherInbox := filepath.Join(h.Dir, "groups", "other", "inbox")
	otherFile := write(filepath.Join(otherInbox, old+"5.txt"))
	hostFile := write(filepath.Join(h.Dir, "host-files", old+"7.txt"))

	groupSays := groupSayer(t, h)
	// prune restarts the host with main's control file in place and waits
	// for the prune that removes it.
	prune := func(t *testing.T) (control string) {
		control = write(filepath.Join(h.Dir, "groups", "main", "inbox", old+"2.txt"))
		// As the host writes inbox files: the sandbox user's, as is the
		// inbox (the prune removes with that user's rights).
		if uid, gid, err := harness.SandboxUser(); err == nil && uid >= 0 {
			for _, p := range []string{filepath.Dir(control), control} {
				require.NoError(t, os.Lchown(p, uid, gid))
			}
		}
		h.Stop()
		h.Start()
		h.For(t).WaitLog(`msg="pruned old history"`)
		return control
	}
	gone := func(p string) bool { _, err := os.Lstat(p); return os.IsNotExist(err) }

	rows := []struct {
		name, plant string
		check       func(t *testing.T, control string) []string
	}{
		{name: "inbox-entries",
			plant: lines("mkdir -p /workspace/group/inbox", "cd /workspace/group/inbox",
				"ln -sf "+hostFile+" "+old+"3.txt", "mkdir -p "+old+"4.txt", "echo KEEP > "+old+"4.txt/inside",
				"echo OLD > "+old+"1.jpg", "echo PLANT-DONE"),
			check: func(t *testing.T, control string) []string {
				inbox := filepath.Join(h.Dir, "groups", "family", "inbox")
				var ev []string
				if gone(hostFile) {
					ev = append(ev, "the host file behind an old-named symlink was removed")
				}
				if gone(filepath.Join(inbox, old+"4.txt", "inside")) {
					ev = append(ev, "a directory's content was removed")
				}
				if !gone(control) || !gone(filepath.Join(inbox, old+"1.jpg")) {
					ev = append(ev, inconclusive+"the prune left old files of the group's own")
				}
				return ev
			}},
		{name: "inbox-symlink",
			plant: lines("cd /workspace/group", "rm -rf inbox", "ln -s "+otherInbox+" inbox", "echo PLANT-DONE"),
			check: func(t *testing.T, control string) []string {
				var ev []string
				if gone(otherFile) {
					ev = append(ev, "another group's inbox file was removed through the symlinked inbox")
				}
				if !strings.Contains(h.Stderr.String(), `msg="inbox not pruned" group=family`) {
					ev = append(ev, inconclusive+"the prune did not report the symlinked inbox")
				}
				if !gone(control) {
					ev = append(ev, inconclusive+"the prune left main's old file")
				}
				return ev
			}},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			name := "retention-" + r.name
			results.set(name, unclear, "did not finish")
			out := groupSays(bash(r.plant))
			if !strings.Contains(out, "PLANT-DONE") {
				results.set(name, unclear, "the plant run did not finish")
				t.Fatalf("%s: plant: %s", name, clip(out, 2000))
			}
			control := prune(t)
			judge(t, name, out, nil, []string{"PLANT-DONE"}, func(t *testing.T) []string { return r.check(t, control) }, nil)
		})
	}
}
