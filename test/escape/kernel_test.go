package escape

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/clawpen/clawpen/test/harness"
)

func init() { register(kernelAttacks) }

// hostKernel is the outcome of an ownKernel row on a backend that shares
// the host's kernel: what it shows is the host kernel's, as expected there
// (DESIGN.md, "gVisor backend"); not a failure of that backend.
const hostKernel = "host-kernel"

// sharesHostKernel reports whether the harness's backend runs sandboxes
// on the host's kernel (bwrap, Docker with runc).
func sharesHostKernel() bool { return harness.Backend() != "gvisor" }

// kernelAttacks learn about the host kernel from inside: its release
// (whose known bugs then apply), its boot time, its memory, the host
// paths behind the sandbox's mounts. Only a kernel of its own hides them;
// on bwrap and Docker they are recorded as host-kernel.
func kernelAttacks() []attack {
	var u unix.Utsname
	_ = unix.Uname(&u)
	release := unix.ByteSliceToString(u.Release[:])
	btime, memTotal := hostProc()
	return []attack{
		{name: "host-kernel-version", ownKernel: true, msg: func(e *env) string {
			return bash(lines(
				`[ "$(uname -r)" = "`+release+`" ] && echo UNAME-IS-HOST || echo UNAME=HELD`,
				`grep -q -F "`+release+`" /proc/version && echo PROC-VERSION-IS-HOST || echo PROC-VERSION=HELD`,
				`grep -q -F "`+release+`" /proc/sys/kernel/osrelease 2>/dev/null && echo OSRELEASE-IS-HOST || echo OSRELEASE=HELD`))
		}, want: []string{"UNAME=HELD", "PROC-VERSION=HELD", "OSRELEASE=HELD"}},

		{name: "host-proc-counters", ownKernel: true, msg: func(e *env) string {
			return bash(lines(
				`grep -q "^btime `+btime+`$" /proc/stat && echo BTIME-IS-HOST || echo BTIME=HELD`,
				`grep -q "^MemTotal: *`+memTotal+` kB$" /proc/meminfo && echo MEMTOTAL-IS-HOST || echo MEMTOTAL=HELD`))
		}, want: []string{"BTIME=HELD", "MEMTOTAL=HELD"}},

		{name: "host-paths-in-mountinfo", ownKernel: true, msg: func(e *env) string {
			return bash(lines(
				`grep -q -F "`+e.h.Dir+`" /proc/self/mountinfo && echo MOUNTINFO-HAS-HOST-DIR || echo MOUNTINFO=HELD`,
				// The 4th field is the mount's root in its file system:
				// a host path for a bind.
				`awk '{print $4}' /proc/self/mountinfo | grep -q -e '^/tmp/' -e '^/run/clawpen/' -e '^/root/' && echo MOUNTINFO-HAS-HOST-PATHS || echo MOUNTINFO-PATHS=HELD`))
		}, want: []string{"MOUNTINFO=HELD", "MOUNTINFO-PATHS=HELD"}},
	}
}

// hostProc is the host's boot time (/proc/stat btime) and MemTotal in kB.
func hostProc() (btime, memTotal string) {
	read := func(path, key string) string {
		f, err := os.Open(path)
		if err != nil {
			return "unknown"
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), key); ok {
				return strings.TrimSuffix(strings.TrimSpace(v), " kB")
			}
		}
		return "unknown"
	}
	return read("/proc/stat", "btime "), read("/proc/meminfo", "MemTotal:")
}

// ownKernelOutcome is how a row that only a kernel of its own holds ends
// on a backend sharing the host's: recorded, not failed.
func ownKernelOutcome(t *testing.T, name string, missing []string) {
	note := fmt.Sprintf("expected on %s, which shares the host's kernel: %s", harness.Backend(), strings.Join(missing, "; "))
	results.set(name, hostKernel, note)
	t.Logf("%s: %s", hostKernel, note)
}
