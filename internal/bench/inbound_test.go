package bench

import (
	"context"
	"os"
	"testing"
)

// The router path runs without binaries, so it is checked here at a tiny
// size; the serve paths are exercised by `clawpen-bench --quick` (test/bench).
func TestRouterBench(t *testing.T) {
	ctx := context.Background()
	rb, err := newRouterBench(ctx, 5, 50, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rb.Close()
	for _, every := range []int{0, 1, 4} {
		rate, lat, err := rb.measure(ctx, 40, every)
		if err != nil {
			t.Fatalf("every %d: %v", every, err)
		}
		if rate <= 0 || len(lat) != 40 {
			t.Fatalf("every %d: rate %v, %d latencies", every, rate, len(lat))
		}
	}
	if err := rb.preload(ctx, 50); err != nil {
		t.Fatal(err)
	}
	if n, err := rb.st.CountMessages(ctx, groupChat(0)); err != nil || n < 20 {
		t.Fatalf("group 0 holds %d messages (%v), want the preloaded and routed ones", n, err)
	}
}

func TestCount(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1_000: "1,000", 100_000: "100,000", 1_234_567: "1,234,567"} {
		if got := count(n); got != want {
			t.Errorf("count(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestRSS(t *testing.T) {
	r, err := readRSS(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// VmRSS is the sum of RssAnon, RssFile and RssShmem.
	if r.anon <= 0 || r.file <= 0 || r.total < r.anon+r.file {
		t.Fatalf("rss of this process: %+v MB", r)
	}
}
