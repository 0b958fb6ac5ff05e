package app

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Most of an idle host's resident memory is not memory it holds: it is its
// own program file, clean page cache that start-up mapped (every linked
// package's init, migrations, the sandbox self-check), which the kernel may
// map a whole large folio at a time, as large as a read-ahead (8 MB on the
// bench machine). So once the
// host has been quiet for a while after work, it pages its program file out
// (madvise MADV_PAGEOUT), after marking that file's mappings MADV_RANDOM so
// that code run later is read and mapped a page at a time, not a read-ahead
// at a time. The cost is on the next message: its code is read again, a
// page per fault (docs/decisions.md, "Idle memory").
const (
	// firstPageOut is when the pages start-up mapped go: by then the
	// first getUpdates is parked (start-up takes ~50 ms).
	firstPageOut = 500 * time.Millisecond
	// quietCheck is how often the host looks whether it went quiet.
	quietCheck = time.Minute
	// quietCPU is the CPU time below which a quietCheck period counts as
	// quiet; an idle long poll costs ~1 ms every 25 s. Work since the last
	// page-out must have cost at least as much for another to be worth it.
	quietCPU = 50 * time.Millisecond
)

// pageOutWhenIdle pages the program out shortly after start-up and again
// whenever a quiet period follows work, until ctx is done. A kernel that
// cannot page out (before Linux 5.4) ends it after one try.
func pageOutWhenIdle(ctx context.Context, log *slog.Logger) {
	wait := time.NewTimer(firstPageOut)
	defer wait.Stop()
	var atCheck, atPageOut time.Duration
	first := true
	for {
		select {
		case <-ctx.Done():
			return
		case <-wait.C:
		}
		wait.Reset(quietCheck)
		used, err := cpuTime()
		if err != nil {
			log.Warn("paging the idle program out stopped", "err", err)
			return
		}
		if first || worthPagingOut(used-atCheck, used-atPageOut) {
			if err := pageOutProgram(); err != nil {
				log.Warn("paging the idle program out stopped", "err", err)
				return
			}
			atPageOut = used
		}
		first, atCheck = false, used
	}
}

// worthPagingOut says whether to page out after a check period that used
// sinceCheck of CPU time, sincePageOut since the last page-out: only when the
// period was quiet and work came before it.
func worthPagingOut(sinceCheck, sincePageOut time.Duration) bool {
	return sinceCheck < quietCPU && sincePageOut >= quietCPU
}

// cpuTime is the CPU time this process used so far (its sandboxes are
// other processes).
func cpuTime() (time.Duration, error) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// pageOutProgram pages out the program file's read-only mappings. It
// changes no content: the kernel drops the clean pages (skipping any another
// process maps too) and reads them again on the next touch.
func pageOutProgram() error {
	maps, err := imageMappings()
	if err != nil {
		return err
	}
	writeBackImage()
	for _, m := range maps {
		for _, advice := range []int{unix.MADV_RANDOM, unix.MADV_PAGEOUT} {
			if err := madvise(m, advice); err != nil {
				return fmt.Errorf("madvise %#x-%#x (%d): %w", m.start, m.end, advice, err)
			}
		}
	}
	return nil
}

// writeBackImage waits until the program file is on disk: a page not yet
// written back (a binary built moments ago) cannot be paged out. Quick for a
// file written long ago; best effort, as a file on a read-only file system
// has nothing to write back.
func writeBackImage() {
	f, err := os.Open("/proc/self/exe")
	if err != nil {
		return
	}
	defer f.Close()
	_ = unix.Fdatasync(int(f.Fd()))
}

// mapping is an address range of this process.
type mapping struct{ start, end uintptr }

// imageMappings are the read-only mappings of this process's executable
// (text, read-only data, the symbol and line tables), from /proc/self/maps.
// Writable ones (data, bss) are anonymous memory once written and are left
// alone.
func imageMappings() ([]mapping, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return nil, fmt.Errorf("find the executable: %w", err)
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return nil, fmt.Errorf("read mappings: %w", err)
	}
	defer f.Close()
	var ms []mapping
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m, perms, path, ok := parseMapsLine(sc.Text())
		if ok && path == exe && !strings.Contains(perms, "w") {
			ms = append(ms, m)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read mappings: %w", err)
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("no mapping of %s in /proc/self/maps", exe)
	}
	return ms, nil
}

// parseMapsLine reads "start-end perms offset dev inode path" (proc(5)); the
// path may hold spaces and is empty for anonymous mappings.
func parseMapsLine(line string) (m mapping, perms, path string, ok bool) {
	fields := strings.SplitN(line, " ", 6)
	if len(fields) < 5 {
		return mapping{}, "", "", false
	}
	lo, hi, found := strings.Cut(fields[0], "-")
	start, err1 := strconv.ParseUint(lo, 16, 64)
	end, err2 := strconv.ParseUint(hi, 16, 64)
	if !found || err1 != nil || err2 != nil || end <= start {
		return mapping{}, "", "", false
	}
	if len(fields) == 6 {
		path = strings.TrimLeft(fields[5], " ")
	}
	return mapping{uintptr(start), uintptr(end)}, fields[1], path, true
}

// madvise advises on an address range the Go runtime did not allocate, so
// there is no slice to hand unix.Madvise.
func madvise(m mapping, advice int) error {
	_, _, errno := unix.Syscall(unix.SYS_MADVISE, m.start, m.end-m.start, uintptr(advice))
	if errno != 0 {
		if errors.Is(errno, unix.EINVAL) && advice == unix.MADV_PAGEOUT {
			return fmt.Errorf("this kernel cannot page out (MADV_PAGEOUT needs Linux 5.4): %w", errno)
		}
		return errno
	}
	return nil
}
