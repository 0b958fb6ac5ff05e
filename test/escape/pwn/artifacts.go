package main

// Artifacts a sandbox leaves on the host, and what its mounts let a setuid
// file do.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

func init() {
	checks["plant-artifacts"] = plantArtifacts
	checks["mountflags"] = mountFlags
	checks["suid-exec"] = suidExec
	checks["own-uid"] = ownUID
}

// plantArtifacts <tag> <dir>... leaves in each dir: setuid and setgid
// copies of this binary, a world-writable file, a world-writable directory
// and a setuid file inside it; every name carries tag. It prints
// PLANTED-<dir>-<what> for each entry whose bits it could set: the sandbox
// may do all of this in its own folders; what matters is what the host
// keeps afterwards.
func plantArtifacts(args []string) {
	if len(args) < 2 {
		fmt.Println("usage: plant-artifacts <tag> <dir>...")
		return
	}
	tag := args[0]
	self, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		fmt.Println("PLANT read self:", err)
		return
	}
	for _, dir := range args[1:] {
		entries := []struct {
			what, name string
			mode       uint32
			dir        bool
		}{
			{"suid", tag + "-suid", 0o6755, false},
			{"sgid", tag + "-sgid", 0o2755, false},
			{"wwfile", tag + "-ww", 0o666, false},
			{"wwdir", tag + "-wwdir", 0o777, true},
			{"suid-in-wwdir", tag + "-wwdir/" + tag + "-suid-in", 0o4755, false},
		}
		for _, e := range entries {
			p := filepath.Join(dir, e.name)
			if e.dir {
				err = os.Mkdir(p, 0o755)
			} else {
				err = os.WriteFile(p, self, 0o755)
			}
			if err == nil {
				err = syscall.Chmod(p, e.mode) // not os.Chmod: it would drop setuid without os.ModeSetuid
			}
			var st syscall.Stat_t
			if err == nil {
				err = syscall.Lstat(p, &st)
			}
			if err != nil || st.Mode&0o7777 != e.mode {
				fmt.Printf("PLANT-FAILED %s %s: %v\n", dir, e.what, err)
				continue
			}
			fmt.Printf("PLANTED-%s-%s %o\n", dir, e.what, st.Mode&0o7777)
		}
	}
	fmt.Println("PLANT-DONE")
}

// mountFlags <path>... prints MOUNT-<path>=HELD when the mount holding path
// is nosuid and nodev (per /proc/self/mountinfo), =BREACH otherwise.
func mountFlags(args []string) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		fmt.Println("MOUNTFLAGS read mountinfo:", err)
		return
	}
	type mnt struct{ point, opts string }
	var mounts []mnt
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 5 {
			mounts = append(mounts, mnt{unescapeMountinfo(f[4]), f[5]})
		}
	}
	for _, p := range args {
		// The last, longest mount point containing p is the one in effect.
		best := mnt{}
		for _, m := range mounts {
			if (p == m.point || strings.HasPrefix(p, strings.TrimSuffix(m.point, "/")+"/")) && len(m.point) >= len(best.point) {
				best = m
			}
		}
		opts := "," + best.opts + ","
		if best.point != "" && strings.Contains(opts, ",nosuid,") && strings.Contains(opts, ",nodev,") {
			fmt.Printf("MOUNT-%s=HELD (%s on %s)\n", p, best.opts, best.point)
		} else {
			fmt.Printf("MOUNT-%s=BREACH (%q on %q)\n", p, best.opts, best.point)
		}
	}
}

func unescapeMountinfo(s string) string {
	return strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`).Replace(s)
}

// suidExec <file> runs a setuid file the host planted (mode 4755, owned by
// root) with "euid": SUIDEXEC=HELD when it runs with our own effective uid,
// =BREACH when the setuid bit gave it another. SUID-SET says the bit was
// there to try.
func suidExec(args []string) {
	if len(args) != 1 {
		fmt.Println("usage: suid-exec <file>")
		return
	}
	var st syscall.Stat_t
	if err := syscall.Stat(args[0], &st); err != nil {
		fmt.Println("SUIDEXEC stat:", err)
		return
	}
	if st.Mode&syscall.S_ISUID != 0 {
		fmt.Printf("SUID-SET owner=%d mode=%o\n", st.Uid, st.Mode&0o7777)
	}
	var fs syscall.Statfs_t
	if err := syscall.Statfs(args[0], &fs); err == nil {
		const stNosuid = 0x2 // ST_NOSUID
		fmt.Printf("SUIDEXEC-MOUNT nosuid=%t\n", fs.Flags&stNosuid != 0)
	}
	c := exec.Command(args[0], "euid")
	c.WaitDelay = time.Second
	out, err := c.CombinedOutput()
	fmt.Printf("SUIDEXEC ran: %s (err %v)\n", strings.TrimSpace(string(out)), err)
	want := fmt.Sprintf("EUID=%d", os.Geteuid())
	if strings.Contains(string(out), "EUID=") && !strings.Contains(string(out), want) {
		fmt.Println("SUIDEXEC=BREACH")
	} else {
		fmt.Println("SUIDEXEC=HELD")
	}
}

// ownUID <path>... prints OWN-<path>=BREACH when the sandbox's own uid owns
// path, =HELD otherwise.
func ownUID(args []string) {
	for _, p := range args {
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			fmt.Printf("OWN-%s stat: %v\n", p, err)
			continue
		}
		if int(st.Uid) == os.Getuid() {
			fmt.Printf("OWN-%s=BREACH (uid %d)\n", p, st.Uid)
		} else {
			fmt.Printf("OWN-%s=HELD (uid %d)\n", p, st.Uid)
		}
	}
}
