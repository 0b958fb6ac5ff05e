package bench

import (
	"testing"
)

// The drafts section runs (small counts) through serve and real sandboxes:
// its one row holds samples and a verdict on its target.
func TestBenchQuickDrafts(t *testing.T) {
	rep := quickReport(t, "drafts")
	if len(rep.Sections) != 1 || rep.Sections[0].Skipped != "" || len(rep.Sections[0].Rows) != 1 {
		t.Fatalf("want the drafts section with one row: %+v", rep.Sections)
	}
	r := rep.Sections[0].Rows[0]
	if r.Skipped != "" || r.Runs == 0 || r.P50 <= 0 {
		t.Errorf("%s holds no figure: %+v", r.Name, r)
	}
	if r.Target == "" || r.Met == nil {
		t.Errorf("%s: no target or no verdict: %+v", r.Name, r)
	}
}
