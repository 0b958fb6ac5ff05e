package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/router"
	"github.com/clawpen/clawpen/internal/store"
)

// preloaded is how many messages the database holds before inbound is measured.
const preloaded = 100_000

// memberID sends every group message; the default sender policy lets him trigger.
const memberID = int64(7777)

// groupChat is the chat id of registered group i.
func groupChat(i int) int64 { return -1_000_000_000 - int64(i) }

// registerGroups puts n groups (g00000 …) into st, one chat each.
func registerGroups(ctx context.Context, b *testing.B, st *store.Store, n int) {
	b.Helper()
	for i := range n {
		chat := groupChat(i)
		if err := st.UpsertChat(ctx, domain.Chat{ID: chat, Title: fmt.Sprint("chat ", i), Type: "supergroup"}); err != nil {
			b.Fatal(err)
		}
		if err := st.PutGroup(ctx, domain.Group{ChatID: chat, Name: fmt.Sprint("group ", i), Folder: fmt.Sprintf("g%05d", i)}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkInbound is messages stored and routed through the real router.Handle
// and a real SQLite store holding `groups` registered groups and 100,000
// messages; Kick only counts, so no sandbox runs. One message in four calls
// the agent ("@Andy"); the two kinds are timed separately within the same mix.
//
//	go test -run '^$' -bench '^BenchmarkInbound$' ./test/bench/
func BenchmarkInbound(b *testing.B) {
	for _, groups := range []int{10, 1_000, 10_000} {
		b.Run(fmt.Sprintf("groups=%d", groups), func(b *testing.B) { benchInbound(b, groups) })
	}
}

func benchInbound(b *testing.B, groups int) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(b.TempDir(), "clawpen.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()

	setup := time.Now()
	registerGroups(ctx, b, st, groups)
	nextID := make([]int64, groups) // per group: the last Telegram message id used
	for i := range preloaded {
		g := i % groups
		nextID[g]++
		_, _, err := st.AddMessage(ctx, domain.Message{
			ChatID: groupChat(g), MessageID: nextID[g], SenderID: memberID, SenderName: "member",
			Text: fmt.Sprint("preloaded message ", i), Time: time.Now(), Triggered: i%10 == 0,
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("setup: %d groups, %d messages in %v", groups, preloaded, time.Since(setup).Round(time.Millisecond))

	var kicks atomic.Int64
	rt, err := router.New(ctx, router.Config{Store: st, Kick: func(string) { kicks.Add(1) },
		OwnerID: 42, AssistantName: "Andy", GroupsDir: filepath.Join(b.TempDir(), "groups"), Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}

	rng := rand.New(rand.NewPCG(1, 2))
	var trig, untrig []time.Duration
	i := 0
	for b.Loop() {
		i++
		g := rng.IntN(groups)
		nextID[g]++
		fires := i%4 == 0
		text := fmt.Sprint("just chatting, message ", i)
		if fires {
			text = fmt.Sprint("@Andy what about message ", i, "?")
		}
		in := router.Inbound{ChatID: groupChat(g), ChatType: "supergroup", ChatTitle: fmt.Sprint("chat ", g), MessageID: nextID[g],
			SenderID: memberID, SenderName: "member", Text: text, Time: time.Now()}
		start := time.Now()
		if err := rt.Handle(ctx, in); err != nil {
			b.Fatal(err)
		}
		d := time.Since(start)
		if fires {
			trig = append(trig, d)
		} else {
			untrig = append(untrig, d)
		}
	}
	if got := kicks.Load(); got != int64(len(trig)) {
		b.Fatalf("%d kicks for %d triggered messages", got, len(trig))
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	rate(b, trig, "trig")
	rate(b, untrig, "untrig")
}

// rate reports messages per second of handling time and the p99 latency of one kind.
func rate(b *testing.B, lat []time.Duration, what string) {
	if len(lat) == 0 {
		return
	}
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	slices.Sort(lat)
	b.ReportMetric(float64(len(lat))/sum.Seconds(), "msgs/s-"+what)
	b.ReportMetric(float64(lat[int(0.99*float64(len(lat)-1))].Microseconds()), "µs-p99-"+what)
}
