package main

// What another host user can do, on the host, with what a sandbox made in
// its folder while its run goes on. Run by the suite as an unprivileged
// host user (nobody), not in a sandbox.

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

func init() { checks["reach"] = reach }

// reach <op>:<path>... tries each op and prints REACH-<op>-<name>=HELD when
// it was refused with EACCES, =BREACH when it worked, =OTHER (and the
// error) when it failed otherwise. Ops: stat (the entry), list (a
// directory), create (a file in a directory), exec (a file, with "euid":
// a setuid file prints another uid than ours).
func reach(args []string) {
	for _, a := range args {
		op, p, _ := strings.Cut(a, ":")
		var err error
		switch op {
		case "stat":
			var st syscall.Stat_t
			err = syscall.Lstat(p, &st)
		case "list":
			_, err = os.ReadDir(p)
		case "create":
			var f *os.File
			if f, err = os.Create(filepath.Join(p, "from-another-user")); err == nil {
				f.Close()
			}
		case "exec":
			c := exec.Command(p, "euid")
			c.WaitDelay = time.Second
			var out []byte
			out, err = c.CombinedOutput()
			fmt.Printf("REACH-exec ran: %s\n", strings.TrimSpace(string(out)))
		default:
			fmt.Println("unknown op", op)
			continue
		}
		name := "REACH-" + op + "-" + filepath.Base(p)
		switch {
		case err == nil:
			fmt.Println(name + "=BREACH")
		case errors.Is(err, syscall.EACCES):
			fmt.Println(name + "=HELD")
		default:
			fmt.Printf("%s=OTHER %v\n", name, err)
		}
	}
}
