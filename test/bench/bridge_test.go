package bench

import (
	"testing"
)

// The bridge section runs (small counts): a bridge call and the bare
// fork-exec, the ratio filled, the p50 target judged.
func TestBenchQuickBridge(t *testing.T) {
	rep := quickReport(t, "bridge")
	if len(rep.Sections) != 1 || rep.Sections[0].Skipped != "" {
		t.Fatalf("want the bridge section, run: %+v", rep.Sections)
	}
	rows := rep.Sections[0].Rows
	if len(rows) != 3 {
		t.Fatalf("%d rows, want 3: %+v", len(rows), rows)
	}
	if rows[0].Runs == 0 || rows[1].Runs != rows[0].Runs {
		t.Errorf("runs: fork-exec %d, bridge %d", rows[0].Runs, rows[1].Runs)
	}
	if rows[1].Ratio <= 0 || rows[1].Met == nil || rows[1].Target == "" {
		t.Errorf("bridge row without ratio or judged target: %+v", rows[1])
	}
	if rows[2].Value == 0 {
		t.Errorf("added p50 holds no figure: %+v", rows[2])
	}
}
