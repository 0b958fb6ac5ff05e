package bench

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestLatencyQuantiles(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var d []time.Duration
		for _, x := range v {
			d = append(d, time.Duration(x)*time.Millisecond)
		}
		return d
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // descending: Latency must sort
	}
	for _, tc := range []struct {
		name               string
		in                 []time.Duration
		runs               int
		min, p50, p95, p99 float64
	}{
		{"none", nil, 0, 0, 0, 0, 0},
		{"one", ms(7), 1, 7, 7, 7, 7},
		{"odd", ms(5, 1, 3), 3, 1, 3, 5, 5},
		{"hundred", ms(hundred...), 100, 1, 51, 95, 99},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Latency("x", tc.in)
			if r.Runs != tc.runs || r.Min != tc.min || r.P50 != tc.p50 || r.P95 != tc.p95 || r.P99 != tc.p99 || r.Unit != "ms" {
				t.Errorf("Latency = runs %d min %v p50 %v p95 %v p99 %v %s, want %d %v %v %v %v ms",
					r.Runs, r.Min, r.P50, r.P95, r.P99, r.Unit, tc.runs, tc.min, tc.p50, tc.p95, tc.p99)
			}
		})
	}
}

func TestFillRatios(t *testing.T) {
	base := Latency("base", []time.Duration{2 * time.Millisecond})
	for _, tc := range []struct {
		name string
		rows []Row
		want float64 // ratio of the last row
	}{
		{"latency over latency", []Row{base, withRatio(Latency("x", []time.Duration{5 * time.Millisecond}), "base")}, 2.5},
		{"value over value", []Row{Value("base", "MB", 4), withRatio(Value("x", "MB", 2), "base")}, 0.5},
		{"missing base", []Row{base, withRatio(Value("x", "MB", 2), "nope")}, 0},
		{"skipped base", []Row{{Name: "base", Skipped: "no"}, withRatio(Value("x", "MB", 2), "base")}, 0},
		{"skipped row", []Row{base, withRatio(Row{Name: "x", Skipped: "no"}, "base")}, 0},
		{"zero base", []Row{Value("base", "MB", 0), withRatio(Value("x", "MB", 2), "base")}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Section{Rows: tc.rows}
			s.fillRatios()
			if got := s.Rows[len(s.Rows)-1].Ratio; got != tc.want {
				t.Errorf("ratio = %v, want %v", got, tc.want)
			}
		})
	}
}

func withRatio(r Row, to string) Row {
	r.RatioTo = to
	return r
}

func TestWriteTable(t *testing.T) {
	rep := &Report{Machine: Machine{CPUs: 2, Kernel: "6.1", GoVersion: "go1.26"}, Sections: []Section{
		{Name: "sandbox start", Rows: []Row{
			Latency("raw", []time.Duration{4 * time.Millisecond}),
			withRatio(Latency("wrapped", []time.Duration{6 * time.Millisecond}), "raw").WithTarget("p50 ≤ 2× raw", true),
			withRatio(Latency("slow", []time.Duration{12 * time.Millisecond}), "raw").WithTarget("p50 ≤ 2× raw", false),
			{Name: "docker run", Skipped: "image clawpen-agent:latest not found: make image"},
		}, Notes: []string{"a note"}},
		{Name: "footprint", Skipped: "not here"},
	}}
	var out bytes.Buffer
	if err := rep.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	find := func(prefix string) string {
		for _, l := range lines {
			if strings.HasPrefix(l, prefix) {
				return l
			}
		}
		t.Errorf("no line starting %q in:\n%s", prefix, out.String())
		return ""
	}
	for _, tc := range []struct{ prefix, want string }{
		{"clawpen-bench", "2 CPUs, kernel 6.1, go1.26"},
		{"wrapped ", "1.50× raw"},
		{"wrapped ", "p50 ≤ 2× raw — met"},
		{"slow ", "p50 ≤ 2× raw — NOT met"},
		{"raw ", "4.00 ms"},
		{"docker run", "skipped: image clawpen-agent:latest not found: make image"},
		{"note: ", "a note"},
		{"skipped: ", "not here"},
	} {
		if l := find(tc.prefix); !strings.Contains(l, tc.want) {
			t.Errorf("line %q lacks %q", l, tc.want)
		}
	}
	if l := find("docker run"); strings.Contains(l, "ms") {
		t.Errorf("skipped row shows figures: %q", l)
	}

	// JSON fills ratios too, and a skipped row keeps its reason.
	out.Reset()
	if err := rep.WriteJSON(&out); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(out.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if r := back.Sections[0].Rows[1]; r.Ratio != 1.5 || r.Met == nil || !*r.Met {
		t.Errorf("JSON row = %+v, want ratio 1.5 and met", r)
	}
	if r := back.Sections[0].Rows[3]; r.Skipped == "" || r.Runs != 0 {
		t.Errorf("JSON skipped row = %+v", r)
	}
}
