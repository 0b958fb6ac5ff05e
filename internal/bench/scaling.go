package bench

import (
	"context"
	"fmt"
	"time"
)

// scalingGroups are the sizes the scaling section grows through.
var scalingGroups = [...]int{10, 1_000, 10_000}

// scaling shows how inbound rate, serve start-up, idle RSS and host
// overhead grow with registered groups, and inbound rate with stored messages.
func scaling(ctx context.Context, o Options) Section {
	sec := Section{Name: "scaling"}
	stored, more, n, starts, runs := 10_000, 100_000, 3_000, 5, 50
	if o.Quick {
		stored, more, n, starts, runs = 1_000, 10_000, 500, 2, 5
	}
	name := func(what string, groups int) string { return fmt.Sprintf("%s, %s groups", what, count(groups)) }
	first := scalingGroups[0]

	// Router inbound by groups, the stored messages fixed; the 1,000-group
	// store then grows to show the effect of stored messages.
	var grown *routerBench
	for _, g := range scalingGroups {
		o.progress("bench: scaling: router with %s groups", count(g))
		rb, err := newRouterBench(ctx, g, stored, nil)
		if err != nil {
			return failed(sec, err)
		}
		rate, _, err := rb.measure(ctx, n, 4)
		if err != nil {
			rb.Close()
			return failed(sec, err)
		}
		row := Value(name("router inbound", g)+", "+count(stored)+" stored", "msgs/s", rate)
		if g != first {
			row.RatioTo = name("router inbound", first) + ", " + count(stored) + " stored"
		}
		sec.Rows = append(sec.Rows, row)
		if g == 1_000 {
			grown = rb
			continue
		}
		rb.Close()
	}
	if grown != nil {
		o.progress("bench: scaling: router with %s stored messages", count(more))
		err := grown.preload(ctx, more-stored)
		var rate float64
		if err == nil {
			rate, _, err = grown.measure(ctx, n, 4)
		}
		grown.Close()
		if err != nil {
			return failed(sec, err)
		}
		row := Value(name("router inbound", 1_000)+", "+count(more)+" stored", "msgs/s", rate)
		row.RatioTo = name("router inbound", 1_000) + ", " + count(stored) + " stored"
		sec.Rows = append(sec.Rows, row)
	}

	if o.HostBin == "" || o.AgentBin == "" {
		sec.Notes = append(sec.Notes, "serve and host overhead rows skipped: HostBin or AgentBin not set")
		return sec
	}
	var rss []Row
	for _, g := range scalingGroups {
		o.progress("bench: scaling: serve start-up with %s groups", count(g))
		startup, idle, err := serveIdle(ctx, o, g, starts)
		if err != nil {
			return failed(sec, err)
		}
		row := Latency(name("serve start-up", g), startup)
		mem := Value(name("RSS idle", g), "MB", idle.total)
		if g != first {
			row.RatioTo, mem.RatioTo = name("serve start-up", first), name("RSS idle", first)
		}
		sec.Rows = append(sec.Rows, row)
		rss = append(rss, mem)
	}
	sec.Rows = append(sec.Rows, rss...)

	var toSend []Row
	for _, g := range scalingGroups {
		o.progress("bench: scaling: host overhead with %s groups", count(g))
		ov, err := measureHostOverhead(ctx, o, g, runs)
		if err != nil {
			sec.Rows = append(sec.Rows, Row{Name: name("host overhead, update→sandbox start", g), Skipped: err.Error()})
			continue
		}
		a := Latency(name("host overhead, update→sandbox start", g), ov.updateToStart)
		b := Latency(name("host overhead, output→sendMessage", g), ov.outputToSend)
		if g != first {
			a.RatioTo, b.RatioTo = name("host overhead, update→sandbox start", first), name("host overhead, output→sendMessage", first)
		}
		sec.Rows = append(sec.Rows, a)
		toSend = append(toSend, b)
	}
	sec.Rows = append(sec.Rows, toSend...)
	sec.Notes = append(sec.Notes,
		fmt.Sprintf("router rows: %s messages, 1 in 4 triggered, through router.Handle and a real store (as in inbound throughput)", count(n)),
		"serve rows: exec to first getUpdates, and VmRSS after idling "+settle(o).String()+", with the groups registered before start",
		fmt.Sprintf("host overhead rows: %d runs each, as in the host overhead section", runs))
	return sec
}

// preload stores k more messages, round robin over the groups.
func (b *routerBench) preload(ctx context.Context, k int) error {
	begin := time.Now()
	defer func() { b.setup += time.Since(begin) }()
	return b.addMessages(ctx, k)
}
