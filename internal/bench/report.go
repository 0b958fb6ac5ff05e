// Package bench is clawpen-bench (cmd/clawpen-bench): it measures sandbox start-up, the host's
// own overhead, inbound throughput, footprint and scaling on this machine,
// with real processes (fork-exec, raw bwrap, clawpen's sandboxes running the
// real clawpen-agent, the real router, store and `clawpen serve`) against the
// fake Telegram and fake model it starts itself on loopback. Figures are
// reported, never asserted.
package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is one bench run: the machine, then its sections in order.
type Report struct {
	Machine  Machine   `json:"machine"`
	Sections []Section `json:"sections"`
}

// Machine says where the figures come from.
type Machine struct {
	CPUs      int    `json:"cpus"`
	Kernel    string `json:"kernel"`
	GoVersion string `json:"go_version"`
	Bwrap     string `json:"bwrap,omitempty"`
	Docker    string `json:"docker,omitempty"`
	Quick     bool   `json:"quick"`
}

// Section is one table of the report ("sandbox start", "host overhead", …).
type Section struct {
	Name    string   `json:"name"`
	Rows    []Row    `json:"rows"`
	Skipped string   `json:"skipped,omitempty"` // why the whole section did not run
	Notes   []string `json:"notes,omitempty"`
}

// Row is one measured figure. Latencies fill Runs/Min/P50/P95/P99 (in Unit,
// usually "ms"); single values (a rate, a size) fill only Value. Ratio is
// P50 (or Value) over the row named by RatioTo in the same section.
type Row struct {
	Name    string  `json:"name"`
	Unit    string  `json:"unit"`
	Runs    int     `json:"runs,omitempty"`
	Min     float64 `json:"min,omitempty"`
	P50     float64 `json:"p50,omitempty"`
	P95     float64 `json:"p95,omitempty"`
	P99     float64 `json:"p99,omitempty"`
	Value   float64 `json:"value,omitempty"`
	RatioTo string  `json:"ratio_to,omitempty"`
	Ratio   float64 `json:"ratio,omitempty"`
	Target  string  `json:"target,omitempty"` // e.g. "≤ 2× raw bwrap"
	Met     *bool   `json:"met,omitempty"`    // whether Target is met; nil without a target
	Skipped string  `json:"skipped,omitempty"`
}

// Latency summarises samples as a row in milliseconds.
func Latency(name string, samples []time.Duration) Row {
	r := Row{Name: name, Unit: "ms", Runs: len(samples)}
	if len(samples) == 0 {
		return r
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	q := func(p float64) float64 { return ms(s[int(p*float64(len(s)-1)+0.5)]) }
	r.Min, r.P50, r.P95, r.P99 = ms(s[0]), q(0.50), q(0.95), q(0.99)
	return r
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

// Value is a single-figure row.
func Value(name, unit string, v float64) Row { return Row{Name: name, Unit: unit, Value: v} }

// WithTarget records a target and whether it is met.
func (r Row) WithTarget(target string, met bool) Row {
	r.Target, r.Met = target, &met
	return r
}

// fillRatios sets Ratio for every row naming another row of the section.
func (s *Section) fillRatios() {
	for i := range s.Rows {
		r := &s.Rows[i]
		if r.RatioTo == "" || r.Skipped != "" {
			continue
		}
		for _, base := range s.Rows {
			if base.Name == r.RatioTo && base.Skipped == "" {
				if b := base.figure(); b > 0 {
					r.Ratio = r.figure() / b
				}
			}
		}
	}
}

func (r Row) figure() float64 {
	if r.Runs > 0 {
		return r.P50
	}
	return r.Value
}

// WriteJSON writes the report as indented JSON.
func (rep *Report) WriteJSON(w io.Writer) error {
	for i := range rep.Sections {
		rep.Sections[i].fillRatios()
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// WriteTable writes the report as aligned plain-text tables.
func (rep *Report) WriteTable(w io.Writer) error {
	m := rep.Machine
	fmt.Fprintf(w, "clawpen-bench — %d CPUs, kernel %s, %s", m.CPUs, m.Kernel, m.GoVersion)
	if m.Bwrap != "" {
		fmt.Fprintf(w, ", bwrap %s", m.Bwrap)
	}
	if m.Docker != "" {
		fmt.Fprintf(w, ", Docker %s", m.Docker)
	}
	if m.Quick {
		fmt.Fprint(w, " (quick: small counts, figures are rough)")
	}
	fmt.Fprintln(w)
	for i := range rep.Sections {
		s := &rep.Sections[i]
		s.fillRatios()
		fmt.Fprintf(w, "\n## %s\n", s.Name)
		if s.Skipped != "" {
			fmt.Fprintf(w, "skipped: %s\n", s.Skipped)
			continue
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "what\truns\tmin\tp50\tp95\tp99\tvalue\tratio\ttarget")
		for _, r := range s.Rows {
			if r.Skipped != "" {
				fmt.Fprintf(tw, "%s\t\t\t\t\t\tskipped: %s\t\t\n", r.Name, r.Skipped)
				continue
			}
			cols := []string{r.Name, "", "", "", "", "", "", "", ""}
			if r.Runs > 0 {
				cols[1] = fmt.Sprint(r.Runs)
				cols[2], cols[3], cols[4], cols[5] = num(r.Min, r.Unit), num(r.P50, r.Unit), num(r.P95, r.Unit), num(r.P99, r.Unit)
			} else {
				cols[6] = num(r.Value, r.Unit)
			}
			if r.Ratio > 0 {
				cols[7] = fmt.Sprintf("%.2f× %s", r.Ratio, r.RatioTo)
			}
			if r.Target != "" {
				mark := "met"
				if r.Met != nil && !*r.Met {
					mark = "NOT met"
				}
				cols[8] = r.Target + " — " + mark
			}
			fmt.Fprintln(tw, strings.Join(cols, "\t"))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		for _, n := range s.Notes {
			fmt.Fprintf(w, "note: %s\n", n)
		}
	}
	return nil
}

func num(v float64, unit string) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f %s", v, unit)
	case v >= 10:
		return fmt.Sprintf("%.1f %s", v, unit)
	default:
		return fmt.Sprintf("%.2f %s", v, unit)
	}
}
