package bench

import (
	"testing"
)

// The egress section runs (small counts): latency through the proxy and
// direct, the download both ways, ratios filled, both targets judged.
func TestBenchQuickEgress(t *testing.T) {
	rep := quickReport(t, "egress")
	if len(rep.Sections) != 1 || rep.Sections[0].Skipped != "" {
		t.Fatalf("want the egress section, run: %+v", rep.Sections)
	}
	s := rep.Sections[0]
	var ratios, targets int
	for _, r := range s.Rows {
		if r.Runs == 0 && r.Value == 0 {
			t.Errorf("%s holds no figure", r.Name)
		}
		if r.RatioTo != "" {
			ratios++
			if r.Ratio <= 0 {
				t.Errorf("%s: ratio to %q not filled", r.Name, r.RatioTo)
			}
		}
		if r.Target != "" {
			targets++
			if r.Met == nil {
				t.Errorf("%s: target %q without a verdict", r.Name, r.Target)
			}
		}
	}
	if len(s.Rows) != 5 || ratios != 2 || targets != 2 {
		t.Errorf("%d rows, %d ratios, %d targets; want 5, 2, 2: %+v", len(s.Rows), ratios, targets, s.Rows)
	}
}
