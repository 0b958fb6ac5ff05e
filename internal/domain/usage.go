package domain

import "time"

// DayLayout is how a usage day is written: the date in the host's time zone
// (TZ). Written this way, days sort as text in time order.
const DayLayout = "2006-01-02"

// Day is the usage day of t in loc.
func Day(t time.Time, loc *time.Location) string {
	if loc == nil {
		loc = time.Local
	}
	return t.In(loc).Format(DayLayout)
}

// Usage is the model tokens a group used on one day (DESIGN.md, "Usage and
// budgets"). Input counts cache reads and writes too.
type Usage struct {
	Group    string
	Day      string // DayLayout, in TZ
	Model    string // "" for every model together
	Input    int64
	Output   int64
	Requests int64 // answers that reported usage
}

// Total is what a daily budget counts: input plus output.
func (u Usage) Total() int64 { return u.Input + u.Output }

// Transcribed is the audio a group had transcribed on one day.
type Transcribed struct {
	Group   string
	Day     string // DayLayout, in TZ
	Seconds int64  // each file's length, rounded up to whole seconds
	Files   int64
}
