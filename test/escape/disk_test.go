package escape

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func init() { register(diskAttacks) }

// diskQuotaMB is the escape host's CLAWPEN_DISK_MB: small enough that filling
// past it is quick, large enough for the other attacks' own files.
const diskQuotaMB = 256

// maxOvershootMB bounds how far past the quota a run may get before the host
// stops it. The host polls the trees (every 20 ms while they are small), so
// the overshoot is what the sandbox writes in one poll interval and while the
// backend kills it: measured 66-220 MiB with eight writers filling the page
// cache as fast as this machine allows (the test logs it). The bound only
// tells an enforced quota from none (2.4 GB would be written), so it is
// loose: how fast the machine writes is not what is tested.
const maxOvershootMB = 1024

// allocated sums what the trees use on disk (blocks, as the quota counts).
func allocated(roots ...string) int64 {
	var n int64
	for _, root := range roots {
		_ = filepath.WalkDir(root, func(_ string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if fi, err := d.Info(); err == nil {
				if st, ok := fi.Sys().(*syscall.Stat_t); ok {
					n += st.Blocks * 512
				}
			}
			return nil
		})
	}
	return n
}

// removeFill deletes what an attack wrote, so the suite's own disk budget holds.
func removeFill(t *testing.T, dirs ...string) {
	for _, d := range dirs {
		matches, _ := filepath.Glob(filepath.Join(d, "fill*"))
		for _, m := range matches {
			if err := os.RemoveAll(m); err != nil {
				t.Logf("remove %s: %v", m, err)
			}
		}
	}
}

func diskAttacks() []attack {
	return []attack{
		// Eight writers at once, half in the group folder and half in the
		// session dir: the host must stop the run soon after the two trees
		// together pass the quota.
		{name: "disk-quota-fill", msg: func(e *env) string {
			var w []string
			for i := range 4 {
				w = append(w,
					fmt.Sprintf("dd if=/dev/zero of=/workspace/group/fill%d bs=1M count=300 2>/dev/null &", i),
					fmt.Sprintf("dd if=/dev/zero of=/home/agent/fill%d bs=1M count=300 2>/dev/null &", i))
			}
			return bash(lines(strings.Join(w, " ")+" wait",
				"echo FILLED-MB=$(( $(cat /workspace/group/fill* /home/agent/fill* | wc -c) / 1048576 ))"), 60)
		}, mustRefuse: true, wait: 2 * time.Minute,
			check: func(t *testing.T, e *env, out string) []string {
				session := filepath.Join(e.h.Dir, "data/sessions", e.folder)
				used := allocated(e.groupDir, session)
				over := used - diskQuotaMB<<20
				t.Logf("disk quota %d MiB: the run was stopped with %.1f MiB written, overshoot %.1f MiB",
					diskQuotaMB, float64(used)/(1<<20), float64(over)/(1<<20))
				removeFill(t, e.groupDir, session)
				if over > maxOvershootMB<<20 {
					return []string{fmt.Sprintf("the group wrote %.0f MiB against a quota of %d MiB", float64(used)/(1<<20), diskQuotaMB)}
				}
				return nil
			}},

		// A group already over its quota does not run at all: nothing it asks
		// for happens until space is freed.
		{name: "disk-quota-next-run", setup: func(t *testing.T, e *env) {
			f, err := os.Create(filepath.Join(e.groupDir, "fill-before"))
			require.NoError(t, err)
			defer f.Close()
			chunk := make([]byte, 1<<20)
			for i := range chunk {
				chunk[i] = 'x'
			}
			for range diskQuotaMB + 8 {
				_, err := f.Write(chunk)
				require.NoError(t, err)
			}
			require.NoError(t, f.Sync())
		}, msg: func(e *env) string {
			return bash("echo " + split("RAN-OVER-QUOTA-ANYWAY"))
		}, mustRefuse: true, bad: []string{"RAN-OVER-QUOTA-ANYWAY"},
			check: func(t *testing.T, e *env, out string) []string {
				removeFill(t, e.groupDir)
				return nil
			}},
	}
}
