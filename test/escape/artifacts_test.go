package escape

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/test/harness"
)

func init() { register(artifactAttacks) }

// artifactAttacks: what a sandbox leaves on the host (setuid, setgid and
// world-writable entries, files owned by a real account), what its mounts
// let a setuid file do, who owns groups/global, and the secrets masked
// inside a mounted tree.
func artifactAttacks() []attack {
	// newSecrets are the later built-in blocked patterns, one file each, in a
	// tree mounted into the group; each holds maskSecret plus its name.
	const maskSecret = "MASKSECRET"
	newSecrets := []string{"id_ecdsa", "id_dsa", ".pgpass", "tls/server.key", "tls/ca.pem", ".vault-token",
		".git-credentials", ".pypirc", ".s3cfg", "kubeconfig", "infra/terraform.tfstate", ".config/gh/hosts.yml"}
	return []attack{
		{name: "artifact-setuid-left", msg: func(e *env) string {
			return bash(lines("./pwn plant-artifacts "+artifactTag(e)+" /workspace/group /home/agent /tmp", "ls -la /tmp | head -20"))
		}, want: plantedWants("/workspace/group", "/home/agent", "/tmp"),
			check: func(t *testing.T, e *env, _ string) []string {
				ev := waitStripped(e)
				tree := []string{e.groupDir, sessionDir(e)}
				for _, root := range tree {
					ev = append(ev, privileged(root)...)
				}
				// The sandbox's /tmp is its own: nothing of it is on the host.
				for _, root := range []string{e.h.Dir, os.TempDir(), "/var/tmp", "/dev/shm"} {
					for _, p := range namesWith(root, artifactTag(e), 4) {
						if !within(p, tree...) {
							ev = append(ev, "a sandbox file is on the host: "+p)
						}
					}
				}
				if len(namesWith(e.groupDir, artifactTag(e), 3)) == 0 {
					ev = append(ev, inconclusive+"the planted files are not in the group folder")
				}
				return ev
			}},

		setuidWindow(),

		{name: "artifact-owner", msg: func(e *env) string {
			tag := artifactTag(e)
			return bash(lines("mkdir /workspace/group/"+tag+"-d", "echo x > /workspace/group/"+tag+"-d/f", "echo y > /home/agent/"+tag+"-f",
				"id -u", "echo OWNER-DONE"))
		}, want: []string{"OWNER-DONE"},
			check: func(t *testing.T, e *env, _ string) []string {
				uid, gid, err := harness.SandboxUser()
				require.NoError(t, err)
				if uid < 0 {
					uid, gid = os.Geteuid(), os.Getegid()
				}
				ev := waitStripped(e)
				tag := artifactTag(e)
				for _, p := range []string{filepath.Join(e.groupDir, tag+"-d"), filepath.Join(e.groupDir, tag+"-d", "f"), filepath.Join(sessionDir(e), tag+"-f")} {
					var st syscall.Stat_t
					if err := syscall.Lstat(p, &st); err != nil {
						ev = append(ev, inconclusive+"not written: "+p)
						continue
					}
					name, shell := account(int(st.Uid))
					switch {
					case st.Uid == 0:
						ev = append(ev, fmt.Sprintf("%s is root's", p))
					case int(st.Uid) != uid || int(st.Gid) != gid:
						ev = append(ev, fmt.Sprintf("%s belongs to uid %d gid %d (%s, shell %s), not the sandbox user %d:%d", p, st.Uid, st.Gid, name, shell, uid, gid))
					case os.Geteuid() == 0 && !noLoginShell(shell):
						ev = append(ev, fmt.Sprintf("%s belongs to %s, a login account (shell %s)", p, name, shell))
					}
				}
				return ev
			}},

		{name: "mount-nosuid-nodev", mount: true, setup: func(t *testing.T, e *env) {
			// A setuid-root program planted by the host in the group folder.
			// The folder is already the sandbox user's, as after any run, so
			// the first run does not hand it over (a chown drops setuid).
			uid, gid, err := harness.SandboxUser()
			require.NoError(t, err)
			if uid >= 0 {
				require.NoError(t, os.Lchown(e.groupDir, uid, gid))
			}
			copyExec(t, pwnBin, filepath.Join(e.groupDir, "suid-root"))
			require.NoError(t, syscall.Chmod(filepath.Join(e.groupDir, "suid-root"), 0o4755))
			dir := filepath.Join(e.h.Outside, "shared", "flags-"+e.folder)
			require.NoError(t, os.MkdirAll(dir, 0o755))
			// A device node (/dev/zero's numbers) in the group folder: only
			// nodev keeps the sandbox from using it. The host can, or the
			// row could not fail. (In an extra mount the host masks every
			// device, socket and fifo, whatever the flags: mounts/masks.go.)
			p := filepath.Join(e.groupDir, "devzero")
			require.NoError(t, syscall.Mknod(p, syscall.S_IFCHR|0o666, 1<<8|5))
			require.NoError(t, syscall.Chmod(p, 0o666))
			f, err := os.Open(p)
			require.NoError(t, err, "the host cannot open the device node it made")
			n, err := f.Read(make([]byte, 4))
			f.Close()
			require.True(t, err == nil && n == 4, "the host cannot read the device node it made: %d, %v", n, err)
			e.h.For(t).CLI("groups", "mount", "add", e.folder, dir, "flags")
		}, msg: func(e *env) string {
			// gVisor's kernel (2022-12-19) keeps no nosuid/nodev in its
			// mount table, whatever the spec asks: there the row stands on
			// what the flags are for, the setuid file and device nodes.
			flags := "./pwn mountflags /workspace/group /home/agent /tmp /dev/shm /workspace/global /workspace/extra/flags"
			if harness.Backend() == "gvisor" {
				flags = "grep -e /workspace -e /tmp -e /home /proc/self/mountinfo"
			}
			return bash(lines(flags,
				try("DEVNODE-GROUP", `test "$(head -c 4 /workspace/group/devzero | wc -c)" -gt 0`),
				try("DEVNODE-WRITE", "echo x > /workspace/group/devzero"),
				"./pwn suid-exec /workspace/group/suid-root", "echo FLAGS-DONE"))
		}, want: mountFlagsWant(), bad: []string{"EUID=0"}},

		{name: "global-not-group-owned", setup: func(t *testing.T, e *env) {
			// groups/global as main's runs leave it: the sandbox user's.
			global := filepath.Join(e.h.Dir, "groups", "global")
			require.NoError(t, os.MkdirAll(global, 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(global, "MEMORY.md"), []byte("shared memory\n"), 0o644))
			uid, gid, err := harness.SandboxUser()
			require.NoError(t, err)
			if uid >= 0 {
				for _, p := range []string{global, filepath.Join(global, "MEMORY.md")} {
					require.NoError(t, os.Lchown(p, uid, gid))
				}
			}
		}, msg: func(e *env) string {
			return bash(lines("./pwn own-uid /workspace/global /workspace/global/MEMORY.md",
				try("GLOBAL-WRITE", "touch /workspace/global/pwned"), try("GLOBAL-CHMOD", "chmod 666 /workspace/global/MEMORY.md"),
				"ls -lan /workspace/global", "echo GLOBAL-DONE"))
		}, want: []string{"OWN-/workspace/global=HELD", "OWN-/workspace/global/MEMORY.md=HELD", "GLOBAL-WRITE=HELD", "GLOBAL-CHMOD=HELD", "GLOBAL-DONE"},
			check: func(t *testing.T, e *env, _ string) []string {
				return existing(filepath.Join(e.h.Dir, "groups", "global", "pwned"))
			}},

		{name: "mask-new-secrets", mount: true, setup: func(t *testing.T, e *env) {
			dir := filepath.Join(e.h.Outside, "shared", "masks-"+e.folder)
			for _, s := range newSecrets {
				p := filepath.Join(dir, s)
				require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
				require.NoError(t, os.WriteFile(p, []byte(maskSecret+"-"+s+"\n"), 0o644))
			}
			require.NoError(t, os.WriteFile(filepath.Join(dir, "README"), []byte("MASKS-CONTROL-OK\n"), 0o644))
			e.h.For(t).CLI("groups", "mount", "add", e.folder, dir, "masks")
		}, msg: func(e *env) string {
			return bash(lines("cd /workspace/extra/masks", "cat README",
				"for f in "+strings.Join(newSecrets, " ")+"; do printf '%s=[%s]\\n' $f \"$(head -c 100 $f 2>&1)\"; done",
				"grep -rl "+split(maskSecret)+" . 2>/dev/null | sed 's/^/UNMASKED:/'", "echo MASKS-DONE"))
		}, want: []string{"MASKS-CONTROL-OK", "MASKS-DONE"}, bad: []string{maskSecret, "UNMASKED:"}},
	}
}

// mountFlagsWant is the held evidence of mount-nosuid-nodev: the flags in
// the mount table where the kernel keeps them (not gVisor's), and on every
// backend the setuid file and the device nodes that fail.
func mountFlagsWant() []string {
	want := []string{"DEVNODE-GROUP=HELD", "DEVNODE-WRITE=HELD", "SUID-SET", "SUIDEXEC=HELD", "FLAGS-DONE"}
	if harness.Backend() == "gvisor" {
		return want
	}
	return append(want, "MOUNT-/workspace/group=HELD", "MOUNT-/home/agent=HELD", "MOUNT-/tmp=HELD", "MOUNT-/dev/shm=HELD",
		"MOUNT-/workspace/global=HELD", "MOUNT-/workspace/extra/flags=HELD")
}

// artifactTag names what one attack plants. It holds the host's own
// directory name: the suites of both backends search the same /tmp, and the
// other host's planted files are not this host's leftovers.
func artifactTag(e *env) string { return "artifact-" + e.folder + "-" + filepath.Base(e.h.Dir) }

func sessionDir(e *env) string { return filepath.Join(e.h.Dir, "data", "sessions", e.folder) }

// plantedWants are the markers plant-artifacts prints for every entry in dirs.
func plantedWants(dirs ...string) []string {
	want := []string{"PLANT-DONE"}
	for _, d := range dirs {
		for _, what := range []string{"suid", "sgid", "wwfile", "wwdir", "suid-in-wwdir"} {
			want = append(want, "PLANTED-"+d+"-"+what+" ")
		}
	}
	return want
}

// waitStripped waits until the host has logged the end of the stripping
// after the attacked group's run (its only one). A host without it never
// logs that: the check then goes on and reports what it finds.
func waitStripped(e *env) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if !e.h.Stderr.Wait(ctx, `msg="after-run strip done" group=`+e.folder+" ") {
		return []string{inconclusive + "the host never logged the after-run strip of " + e.folder}
	}
	return nil
}

// privileged lists the entries under root with setuid, setgid or write for
// others (symlinks aside).
func privileged(root string) []string {
	var ev []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		m := fi.Mode()
		if m&(fs.ModeSetuid|fs.ModeSetgid) != 0 || m.Perm()&0o002 != 0 {
			ev = append(ev, fmt.Sprintf("left on the host: %s %v (uid %d)", p, m, harness.FileUID(fi)))
		}
		return nil
	})
	return ev
}

// namesWith lists the entries under root, at most depth levels down, whose
// name contains s.
func namesWith(root, s string, depth int) []string {
	var out []string
	root = filepath.Clean(root)
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if strings.Contains(d.Name(), s) {
			out = append(out, p)
		}
		if d.IsDir() && p != root && strings.Count(strings.TrimPrefix(p, root), "/") >= depth {
			return fs.SkipDir
		}
		return nil
	})
	return out
}

// within reports whether p is one of roots or below one.
func within(p string, roots ...string) bool {
	for _, r := range roots {
		if p == r || strings.HasPrefix(p, r+"/") {
			return true
		}
	}
	return false
}

// account is the name and shell /etc/passwd gives uid.
func account(uid int) (name, shell string) {
	data, _ := os.ReadFile("/etc/passwd")
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Split(line, ":")
		if len(f) == 7 && f[2] == strconv.Itoa(uid) {
			return f[0], f[6]
		}
	}
	return "no account", ""
}

func noLoginShell(shell string) bool {
	b := filepath.Base(shell)
	return b == "nologin" || b == "false"
}

// setuidWindow: while its run still goes on, the sandbox leaves in its
// folder a copy of pwn setuid and setgid to the sandbox user and a
// world-writable directory (the strip after the run would take the bits
// away, but only then). An unprivileged host user (nobody) then tries to
// reach them on the host: stat the file, run it (it would run as the
// sandbox user, who owns every group's folder), create a file in the
// directory, list the folder. Each must be refused with EACCES. The
// sandbox waits for the host's try, told by a file the suite writes into
// the folder.
func setuidWindow() attack {
	const name = "setuid-window"
	var tried chan string // nobody's output, once tried
	return attack{name: name, setup: func(t *testing.T, e *env) {
		tried = make(chan string, 1)
		tag := artifactTag(e)
		ready, done := filepath.Join(e.groupDir, tag+"-ready"), filepath.Join(e.groupDir, tag+"-tried")
		go func() {
			defer func() { _ = os.WriteFile(done, nil, 0o644) }()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for _, err := os.Lstat(ready); err != nil; _, err = os.Lstat(ready) {
				select {
				case <-ctx.Done():
					tried <- "the sandbox never said it was ready"
					return
				case <-tick.C:
				}
			}
			cmd := exec.CommandContext(ctx, pwnBin, "reach",
				"stat:"+filepath.Join(e.groupDir, tag+"-suid"), "exec:"+filepath.Join(e.groupDir, tag+"-suid"),
				"create:"+filepath.Join(e.groupDir, tag+"-wwdir"), "list:"+e.groupDir)
			cmd.Dir = "/"
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}}
			out, err := cmd.CombinedOutput()
			tried <- fmt.Sprintf("%s(err %v)", out, err)
		}()
	}, msg: func(e *env) string {
		tag := artifactTag(e)
		return bash(lines("./pwn plant-artifacts "+tag+" /workspace/group | grep -c PLANTED-",
			"touch "+tag+"-ready", "i=0",
			"while [ ! -e "+tag+"-tried ] && [ $i -lt 150 ]; do sleep 0.1; i=$((i+1)); done",
			"[ -e "+tag+"-tried ] && echo WINDOW-TRIED-DURING-THE-RUN"), 18)
	}, want: []string{"WINDOW-TRIED-DURING-THE-RUN"},
		check: func(t *testing.T, e *env, _ string) []string {
			var out string
			select {
			case out = <-tried:
			case <-time.After(60 * time.Second):
				return []string{inconclusive + "the host user's try never ended"}
			}
			t.Logf("as nobody, during the run:\n%s", out)
			var ev []string
			for _, l := range strings.Split(out, "\n") {
				if strings.Contains(l, "=BREACH") {
					ev = append(ev, "another host user, during the run: "+l)
				}
			}
			if n := strings.Count(out, "=HELD"); n < 4 && len(ev) == 0 {
				ev = append(ev, inconclusive+fmt.Sprintf("only %d of 4 tries refused with EACCES: %s", n, clip(out, 400)))
			}
			return ev
		}}
}

// nobody is the unprivileged host user the suite tries things as.
const nobody = 65534
