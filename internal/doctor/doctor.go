// Package doctor checks that a machine can run clawpen and says, for every
// problem, exactly how to fix it.
package doctor

import (
	"fmt"
	"io"
)

// Status of one check.
type Status string

// Check statuses: a FAIL makes `clawpen doctor` exit non-zero.
const (
	OK   Status = "ok"
	Warn Status = "warn"
	Fail Status = "FAIL"
)

// Finding is one check's outcome.
type Finding struct {
	Name   string
	Status Status
	Detail string
	Fix    string
}

// Report prints findings and says whether all passed.
func Report(w io.Writer, fs []Finding) bool {
	ok := true
	for _, f := range fs {
		fmt.Fprintf(w, "%-4s %-10s %s\n", f.Status, f.Name, f.Detail)
		if f.Fix != "" && f.Status != OK {
			fmt.Fprintf(w, "     %-10s fix: %s\n", "", f.Fix)
		}
		if f.Status == Fail {
			ok = false
		}
	}
	return ok
}
