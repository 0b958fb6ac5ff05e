package bench

import (
	"testing"
)

// The approval section runs (small counts): the owner's press to the
// tool's start beside the bare fork-exec, the ratio filled, the host's
// part judged against its target.
func TestBenchQuickApproval(t *testing.T) {
	rep := quickReport(t, "approval")
	if len(rep.Sections) != 1 || rep.Sections[0].Skipped != "" {
		t.Fatalf("want the approval section, run: %+v", rep.Sections)
	}
	rows := rep.Sections[0].Rows
	if len(rows) != 3 {
		t.Fatalf("%d rows, want 3: %+v", len(rows), rows)
	}
	if rows[0].Runs == 0 || rows[1].Runs != rows[0].Runs {
		t.Errorf("runs: fork-exec %d, press %d", rows[0].Runs, rows[1].Runs)
	}
	if rows[1].P50 <= 0 || rows[1].Ratio <= 0 {
		t.Errorf("press row without a figure or ratio: %+v", rows[1])
	}
	if rows[2].Met == nil || rows[2].Target == "" {
		t.Errorf("the host's part without a judged target: %+v", rows[2])
	}
}
