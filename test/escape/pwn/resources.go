package main

// Resource attacks: each tries to hold more than the sandbox may, and reports
// how much it actually held at one moment. The holders run as child processes
// that volunteer to be the OOM killer's first victim (oom_score_adj 1000), so
// that the limit, when it bites, kills them rather than the agent and the
// verdict can be printed.

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

const mib = 1 << 20

// step is how much a holder adds between two reports.
const step = 4 * mib

func init() {
	checks["hold"] = holdCheck
	checks["hold-child"] = holdChild
	checks["mem-procs"] = memProcs
	checks["forkbomb"] = forkBomb
}

// holdCheck: pwn hold KIND TRY_MB LIMIT_MB NAME. One holder of KIND (anon,
// memfd, sysv or file:DIR) tries to hold TRY_MB; NAME=BREACH when it held
// more than LIMIT_MB at once. Each report comes from the holder after the
// memory is in place, so the largest is a true "held at once".
func holdCheck(args []string) {
	if len(args) != 4 {
		fmt.Println("usage: pwn hold KIND TRY_MB LIMIT_MB NAME")
		os.Exit(2)
	}
	kind, name := args[0], args[3]
	limit := atoi(args[2])
	h, err := startHolder(kind, args[1])
	if err != nil {
		fmt.Printf("%s setup: %v\n", name, err)
		os.Exit(1)
	}
	h.wait(time.Minute)
	h.release()
	if dir, ok := strings.CutPrefix(kind, "file:"); ok {
		removeFills(dir) // a killed holder leaves its files
	}
	for _, id := range h.shmids {
		_, _ = unix.SysvShmCtl(id, unix.IPC_RMID, nil)
	}
	fmt.Printf("%s-MB=%d (%s)\n", name, h.held/mib, h.end)
	judge(name, h.held, int64(limit)*mib)
}

// memProcs: pwn mem-procs N MB LIMIT_MB NAME. N holders of MB anonymous
// memory each. Once each is done or dead, every survivor is asked to answer:
// all that answer were alive, holding their memory, at the first answer, so
// their sum was held at once.
func memProcs(args []string) {
	if len(args) != 4 {
		fmt.Println("usage: pwn mem-procs N MB LIMIT_MB NAME")
		os.Exit(2)
	}
	n, name := atoi(args[0]), args[3]
	limit := atoi(args[2])
	var hs []*holder
	for range n {
		h, err := startHolder("anon", args[1])
		if err != nil {
			fmt.Printf("%s setup: %v\n", name, err)
			os.Exit(1)
		}
		hs = append(hs, h)
	}
	var wg sync.WaitGroup
	for _, h := range hs {
		wg.Go(func() { h.wait(time.Minute) })
	}
	wg.Wait()
	var total int64
	alive := 0
	for _, h := range hs {
		if h.ping() {
			total += h.held
			alive++
		}
	}
	for _, h := range hs {
		h.release()
	}
	fmt.Printf("%s-MB=%d (%d of %d holders alive)\n", name, total/mib, alive, n)
	judge(name, total, int64(limit)*mib)
}

func judge(name string, held, limit int64) {
	if held > limit {
		fmt.Printf("%s=BREACH\n", name)
	} else {
		fmt.Printf("%s=HELD\n", name)
	}
}

// holder is one child holding memory; it reports "held BYTES" after each
// step, "stopped REASON" when it cannot go on, "done" at the end, then
// answers each byte on its stdin with "alive" until stdin closes.
type holder struct {
	cmd    *exec.Cmd
	stdin  *os.File
	lines  chan string
	held   int64
	end    string // done, the reason it stopped, or how it died
	shmids []int
	done   bool
}

func startHolder(kind, tryMB string) (*holder, error) {
	cmd := exec.Command("/proc/self/exe", "hold-child", kind, tryMB)
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdin = inR
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	inR.Close()
	h := &holder{cmd: cmd, stdin: inW, lines: make(chan string, 16)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			h.lines <- sc.Text()
		}
		close(h.lines)
	}()
	return h, nil
}

// wait reads reports until the holder is done or gone.
func (h *holder) wait(max time.Duration) {
	timeout := time.After(max)
	for {
		select {
		case l, ok := <-h.lines:
			if !ok {
				err := h.cmd.Wait()
				h.end = fmt.Sprintf("holder died: %v", err)
				return
			}
			switch {
			case strings.HasPrefix(l, "held "):
				h.held = int64(atoi(strings.TrimPrefix(l, "held ")))
			case strings.HasPrefix(l, "shmid "):
				h.shmids = append(h.shmids, atoi(strings.TrimPrefix(l, "shmid ")))
			case strings.HasPrefix(l, "stopped "):
				h.end = l
			case l == "done":
				if h.end == "" {
					h.end = "done"
				}
				h.done = true
				return
			}
		case <-timeout:
			h.end = "timed out"
			return
		}
	}
}

// ping asks a holder that is done whether it is still alive.
func (h *holder) ping() bool {
	if !h.done {
		return false
	}
	if _, err := h.stdin.Write([]byte{1}); err != nil {
		return false
	}
	select {
	case l, ok := <-h.lines:
		return ok && l == "alive"
	case <-time.After(10 * time.Second):
		return false
	}
}

func (h *holder) release() {
	h.stdin.Close()
	_ = h.cmd.Process.Kill()
	for range h.lines {
	}
	_ = h.cmd.Wait()
}

// holdChild: pwn hold-child KIND TRY_MB (run by hold and mem-procs).
func holdChild(args []string) {
	_ = os.WriteFile("/proc/self/oom_score_adj", []byte("1000"), 0)
	kind, want := args[0], int64(atoi(args[1]))*mib
	var held int64
	report := func() { fmt.Printf("held %d\n", held) }
	stop := func(err error) { fmt.Printf("stopped %v\n", err) }
	switch {
	case kind == "anon":
		mem, err := unix.Mmap(-1, 0, int(want), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			stop(err)
			break
		}
		for held < want {
			next := min(held+step, want)
			touch(mem[held:next])
			held = next
			report()
		}
	case kind == "memfd":
		// A fresh memfd every 256 MiB: no file size limit stops the total.
		chunk := fill(mib)
		fd := -1
		for held < want {
			if held%(256*mib) == 0 {
				var err error
				if fd, err = unix.MemfdCreate("pwn", 0); err != nil {
					stop(err)
					break
				}
			}
			n, err := unix.Write(fd, chunk)
			held += int64(max(n, 0))
			if err != nil {
				stop(err)
				break
			}
			if held%step == 0 {
				report()
			}
		}
		report()
	case kind == "sysv":
		// Segments are detached once touched: they outlive the mapping (and
		// would outlive this process; hold removes them), so no address
		// space limit sees them.
		const seg = 64 * mib
		for held < want {
			id, err := unix.SysvShmGet(unix.IPC_PRIVATE, seg, unix.IPC_CREAT|0o600)
			if err != nil {
				stop(err)
				break
			}
			fmt.Printf("shmid %d\n", id)
			mem, err := unix.SysvShmAttach(id, 0, 0)
			if err != nil {
				stop(err)
				break
			}
			for off := 0; off < seg; off += step {
				touch(mem[off : off+step])
				held += step
				report()
			}
			_ = unix.SysvShmDetach(mem)
		}
	case strings.HasPrefix(kind, "file:"):
		dir := strings.TrimPrefix(kind, "file:")
		chunk := fill(mib)
		for i := 0; held < want; i++ {
			f, err := os.Create(filepath.Join(dir, fmt.Sprintf("pwn-fill-%d", i)))
			if err != nil {
				stop(err)
				break
			}
			var werr error
			for j := 0; j < 64 && held < want; j++ {
				n, err := f.Write(chunk)
				held += int64(n)
				if err != nil {
					werr = err
					break
				}
				if held%step == 0 {
					report()
				}
			}
			f.Close()
			if werr != nil {
				stop(werr)
				break
			}
		}
		report()
		removeFills(dir)
	default:
		fmt.Println("unknown kind", kind)
		os.Exit(2)
	}
	fmt.Println("done")
	// Hold until told to go: answer each ping.
	b := make([]byte, 1)
	for {
		if _, err := os.Stdin.Read(b); err != nil {
			return
		}
		fmt.Println("alive")
	}
}

// touch writes every page, so each is really allocated.
func touch(b []byte) {
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
}

func fill(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'x'
	}
	return b
}

func removeFills(dir string) {
	m, _ := filepath.Glob(filepath.Join(dir, "pwn-fill-*"))
	for _, p := range m {
		_ = os.Remove(p)
	}
}

// forkBomb: pwn forkbomb MAX LIMIT NAME. Starts up to MAX single-threaded
// sleepers and holds them all; NAME=BREACH when more than LIMIT ran at once.
func forkBomb(args []string) {
	if len(args) != 3 {
		fmt.Println("usage: pwn forkbomb MAX LIMIT NAME")
		os.Exit(2)
	}
	maxN, limit, name := atoi(args[0]), atoi(args[1]), args[2]
	var procs []*exec.Cmd
	var why error
	for len(procs) < maxN {
		c := exec.Command("/bin/sleep", "300")
		if err := c.Start(); err != nil {
			why = err
			break
		}
		procs = append(procs, c)
	}
	// Sleepers do not die on their own: all started are alive now.
	alive := 0
	for _, c := range procs {
		if c.Process.Signal(syscall.Signal(0)) == nil {
			alive++
		}
	}
	for _, c := range procs {
		_ = c.Process.Kill()
		_ = c.Wait()
	}
	if why == nil {
		why = errors.New("reached MAX")
	}
	fmt.Printf("%s-PROCS=%d (stopped: %v)\n", name, alive, why)
	if alive > limit {
		fmt.Printf("%s=BREACH\n", name)
	} else {
		fmt.Printf("%s=HELD\n", name)
	}
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		fmt.Println("not a number:", s)
		os.Exit(2)
	}
	return n
}
