package app

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestWorthPagingOut(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		name                     string
		sinceCheck, sincePageOut time.Duration
		want                     bool
	}{
		{"quiet after work", 2 * ms, 900 * ms, true},
		{"quiet, work just reaching the threshold", 0, quietCPU, true},
		{"still working", 400 * ms, 900 * ms, false},
		{"working just at the threshold", quietCPU, 900 * ms, false},
		{"quiet since the last page-out", 2 * ms, 10 * ms, false},
		{"nothing at all", 0, 0, false},
	} {
		if got := worthPagingOut(c.sinceCheck, c.sincePageOut); got != c.want {
			t.Errorf("%s: worthPagingOut(%v, %v) = %t, want %t", c.name, c.sinceCheck, c.sincePageOut, got, c.want)
		}
	}
}

func TestParseMapsLine(t *testing.T) {
	for _, c := range []struct {
		line        string
		ok          bool
		start, end  uintptr
		perms, path string
	}{
		{"00403000-00a78000 r-xp 00003000 fe:00 9987094                            /work/bin/clawpen",
			true, 0x403000, 0xa78000, "r-xp", "/work/bin/clawpen"},
		{"7f2004000000-7f20040c5000 rw-p 00000000 00:00 0 ", true, 0x7f2004000000, 0x7f20040c5000, "rw-p", ""},
		{"7f2004000000-7f20040c5000 rw-p 00000000 00:00 0", true, 0x7f2004000000, 0x7f20040c5000, "rw-p", ""},
		{"00400000-00403000 r--p 00000000 fe:00 1  /opt/my tools/clawpen (deleted)",
			true, 0x400000, 0x403000, "r--p", "/opt/my tools/clawpen (deleted)"},
		{"7fffb86ea000-7fffb870b000 rw-p 00000000 00:00 0                          [stack]",
			true, 0x7fffb86ea000, 0x7fffb870b000, "rw-p", "[stack]"},
		{"", false, 0, 0, "", ""},
		{"zz-10 r--p 0 0:0 0", false, 0, 0, "", ""},
		{"20-10 r--p 0 0:0 0 /x", false, 0, 0, "", ""},
	} {
		m, perms, path, ok := parseMapsLine(c.line)
		if ok != c.ok || m.start != c.start || m.end != c.end || perms != c.perms || path != c.path {
			t.Errorf("parseMapsLine(%q) = %#x-%#x %q %q %t, want %#x-%#x %q %q %t",
				c.line, m.start, m.end, perms, path, ok, c.start, c.end, c.perms, c.path, c.ok)
		}
	}
}

// TestPageOutProgram pages this test binary out and reads the kernel's view
// of its mappings: far fewer resident kilobytes than before, and each marked
// for random reads (VmFlags "rr"). The binary was just built, so it also
// shows that pages not yet written back are written and paged out.
func TestPageOutProgram(t *testing.T) {
	ms, err := imageMappings()
	if err != nil {
		t.Fatal(err)
	}
	before := imageSmaps(t, ms)
	if before.rssKB == 0 {
		t.Fatalf("the image has no resident pages before: %+v", before)
	}
	if err := pageOutProgram(); err != nil {
		t.Fatal(err)
	}
	after := imageSmaps(t, ms)
	t.Logf("image resident: %d kB before, %d kB after", before.rssKB, after.rssKB)
	if after.rssKB*2 > before.rssKB {
		t.Errorf("image resident %d kB after, was %d kB: not paged out", after.rssKB, before.rssKB)
	}
	if after.randomRead != len(ms) {
		t.Errorf("%d of %d image mappings marked for random reads", after.randomRead, len(ms))
	}
}

type smapsSum struct {
	rssKB      int
	randomRead int // mappings whose VmFlags hold "rr"
}

// imageSmaps sums /proc/self/smaps over the mappings that start where ms do.
func imageSmaps(t *testing.T, ms []mapping) smapsSum {
	t.Helper()
	starts := map[uintptr]bool{}
	for _, m := range ms {
		starts[m.start] = true
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var sum smapsSum
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if m, _, _, ok := parseMapsLine(line); ok {
			in = starts[m.start]
			continue
		}
		if !in {
			continue
		}
		if v, ok := strings.CutPrefix(line, "Rss:"); ok {
			kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			if err != nil {
				t.Fatalf("smaps %q: %v", line, err)
			}
			sum.rssKB += kb
		}
		if v, ok := strings.CutPrefix(line, "VmFlags:"); ok && strings.Contains(" "+v+" ", " rr ") {
			sum.randomRead++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return sum
}
