// Command pwn is the attacker's own static binary: the escape suite copies it
// into a group's folder and the agent runs it from /workspace/group. Each
// subcommand tries one thing and prints NAME=HELD when the sandbox stopped it
// or NAME=BREACH when it worked (the two words share no substring).
package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Println("usage: pwn <check> [args]")
		os.Exit(2)
	}
	args := os.Args[2:]
	switch os.Args[1] {
	case "tiocsti":
		ttyIoctl("TIOCSTI", func(fd int) error {
			c := byte('x')
			return ioctl(fd, syscall.TIOCSTI, uintptr(unsafe.Pointer(&c)))
		})
	case "tioclinux":
		ttyIoctl("TIOCLINUX", func(fd int) error {
			sub := byte(3) // paste the selection buffer into the terminal
			return ioctl(fd, syscall.TIOCLINUX, uintptr(unsafe.Pointer(&sub)))
		})
	case "unshare-user":
		verdict("UNSHARE-USER", inNewNS(syscall.CLONE_NEWUSER))
	case "unshare-mount":
		verdict("UNSHARE-MOUNT", inNewNS(syscall.CLONE_NEWNS))
	case "mount-tmpfs":
		dir := filepath.Join(os.TempDir(), "mnt-probe")
		_ = os.MkdirAll(dir, 0o755)
		verdict("MOUNT-TMPFS", syscall.Mount("none", dir, "tmpfs", 0, ""))
	case "ptrace":
		for _, a := range args {
			pid, err := strconv.Atoi(a)
			if err != nil {
				continue
			}
			err = syscall.PtraceAttach(pid)
			if err == nil {
				_ = syscall.PtraceDetach(pid)
			}
			verdict("PTRACE-"+a, err)
		}
	case "setuid-self":
		setuidSelf()
	case "euid":
		fmt.Printf("EUID=%d\n", os.Geteuid())
	case "suid-watch":
		for _, bin := range args {
			suidWatch(bin)
		}
	case "connect":
		for _, a := range args {
			c, err := net.DialTimeout("tcp", a, 2*time.Second)
			if err == nil {
				c.Close()
			}
			verdict("CONNECT-"+a, err)
		}
	case "unix":
		for _, a := range args {
			c, err := net.DialTimeout("unix", a, 2*time.Second)
			if err == nil {
				c.Close()
			}
			verdict("UNIX-"+a, err)
		}
	case "http":
		// pwn http METHOD PATH [BODY]: one raw request on the host socket.
		if len(args) < 2 {
			fmt.Println("usage: pwn http METHOD PATH [BODY]")
			os.Exit(2)
		}
		body := ""
		if len(args) > 2 {
			body = args[2]
		}
		rawHTTP(args[0], args[1], body)
	default:
		check, ok := checks[os.Args[1]]
		if !ok {
			fmt.Println("unknown check", os.Args[1])
			os.Exit(2)
		}
		check(args)
	}
}

// checks are the subcommands defined in other files of this command; each
// file adds its own in init.
var checks = map[string]func(args []string){}

func ioctl(fd int, req uint, arg uintptr) error {
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), uintptr(req), arg); e != 0 {
		return e
	}
	return nil
}

// inNewNS starts a child of this binary in a new namespace: unshare(2) of a
// user or mount namespace is refused to any multi-threaded process (a Go
// program), which would pass the check for the wrong reason.
func inNewNS(flag uintptr) error {
	cmd := exec.Command("/proc/self/exe", "euid")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: flag}
	out, err := cmd.CombinedOutput()
	fmt.Printf("child in new namespace: %s\n", strings.TrimSpace(string(out)))
	return err
}

func verdict(name string, err error) {
	if err != nil {
		fmt.Printf("%s=HELD (%v)\n", name, err)
		return
	}
	fmt.Printf("%s=BREACH\n", name)
}

// ttyIoctl tries the ioctl on the standard descriptors and on every terminal
// device the sandbox can open.
func ttyIoctl(name string, try func(fd int) error) {
	fds := map[string]int{"stdin": 0, "stdout": 1, "stderr": 2}
	// Not /dev/ptmx or /dev/pts: a pty the sandbox opens there is its own.
	paths := []string{"/dev/tty", "/dev/console"}
	for _, pat := range []string{"/dev/tty?*", "/dev/vcs*"} {
		m, _ := filepath.Glob(pat)
		paths = append(paths, m...)
	}
	for _, p := range paths {
		fd, err := syscall.Open(p, syscall.O_RDWR|syscall.O_NOCTTY, 0)
		if err != nil {
			fmt.Printf("%s open %s: %v\n", name, p, err)
			continue
		}
		fds[p] = fd
	}
	for label, fd := range fds {
		verdict(name+"-"+label, try(fd))
	}
}

// setuidSelf makes a setuid copy of this binary and runs it: the copy is the
// agent's own (uid 1000), so at best it keeps uid 1000; it must never be 0.
func setuidSelf() {
	self, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		fmt.Println("SETUID-SELF read:", err)
		return
	}
	p := filepath.Join(os.TempDir(), "pwn-suid")
	if wd, err := os.Getwd(); err == nil {
		p = filepath.Join(wd, "pwn-suid")
	}
	if err := os.WriteFile(p, self, 0o755); err != nil {
		fmt.Println("SETUID-SELF write:", err)
		return
	}
	defer os.Remove(p)
	if err := os.Chmod(p, 0o4755|os.ModeSetuid); err != nil {
		fmt.Println("SETUID-SELF chmod:", err)
	}
	_ = syscall.Chmod(p, 0o4755)
	c := exec.Command(p, "euid")
	c.WaitDelay = time.Second
	out, err := c.CombinedOutput()
	fmt.Printf("SETUID-SELF ran: %s (err %v)\n", strings.TrimSpace(string(out)), err)
	if strings.Contains(string(out), "EUID=0") {
		fmt.Println("SETUID-SELF=BREACH")
	} else {
		fmt.Println("SETUID-SELF=HELD")
	}
}

// suidWatch starts a setuid-root program that waits on its stdin (a pipe we
// never write) and reads its effective uid from /proc while it waits.
func suidWatch(bin string) {
	if _, err := os.Stat(bin); err != nil {
		fmt.Printf("SUID-%s absent: %v\n", filepath.Base(bin), err)
		return
	}
	cmd := exec.Command(bin)
	if filepath.Base(bin) == "su" {
		cmd.Args = []string{bin, "root", "-c", "id"}
	}
	// Bounded: a killed program's children may hold the output pipe.
	cmd.WaitDelay = time.Second
	pr, pw, err := os.Pipe()
	if err != nil {
		fmt.Println("pipe:", err)
		return
	}
	defer pw.Close()
	cmd.Stdin = pr
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		fmt.Printf("SUID-%s start: %v\n", filepath.Base(bin), err)
		return
	}
	pr.Close()
	euid := "exited"
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if e := statusEUID(cmd.Process.Pid); e != "" {
			euid = e
			if e == "0" {
				break
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	fmt.Printf("SUID-%s euid=%s out=%q\n", filepath.Base(bin), euid, strings.TrimSpace(out.String()))
	if euid == "0" || strings.Contains(out.String(), "uid=0") {
		fmt.Printf("SUID-%s=BREACH\n", filepath.Base(bin))
	} else {
		fmt.Printf("SUID-%s=HELD\n", filepath.Base(bin))
	}
}

func statusEUID(pid int) string {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 3 && f[0] == "Uid:" {
			if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && strings.Contains(string(st), ") Z ") {
				return "" // a zombie tells nothing
			}
			return f[2]
		}
	}
	return ""
}

// rawHTTP sends one request over the host socket and prints the status,
// the headers and the body.
func rawHTTP(method, path, body string) {
	conn, err := net.DialTimeout("unix", "/run/clawpen/host.sock", 2*time.Second)
	if err != nil {
		fmt.Printf("HTTP %s %s: dial: %v\n", method, path, err)
		return
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", method, path, len(body), body)
	resp, err := io.ReadAll(io.LimitReader(conn, 64<<10))
	fmt.Printf("HTTP %s %s ->\n%s\n(read err %v)\n", method, path, resp, err)
}
