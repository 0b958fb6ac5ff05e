package domain

import "time"

// DefaultProfile is the built-in profile of every group that names none:
// no network, the host's default limits, no bridge tools, no token budget.
const DefaultProfile = "default"

// Network modes of a profile.
const (
	NetworkNone      = "none"
	NetworkAllowlist = "allowlist"
)

// Profile is what a group may do beyond the default sandbox (DESIGN.md,
// "Sandbox profiles"), as the admin's profiles file defines it. Zero limits
// mean the host's defaults.
type Profile struct {
	Name    string
	Network string   // NetworkNone or NetworkAllowlist
	Egress  []string // host[:port] entries; "*." prefix matches subdomains, "*" any public host
	// EgressAsk: a public destination Egress does not hold is put to the
	// owner (DESIGN.md, "Approvals") rather than refused.
	EgressAsk   bool
	MemoryMB    int64
	Pids        int
	CPUs        float64
	Timeout     time.Duration
	DiskMB      int64
	Tools       []string // bridge tools a non-main group may call
	DailyTokens int64    // 0: no budget
	// Model is the model the host's proxy pins for the group's runs,
	// whatever the sandbox asks for; "" is the host's (CLAWPEN_MODEL).
	Model string
	// NoTranscribe is "transcribe": false: the group's voice notes are
	// kept as files, never sent to the transcriber.
	NoTranscribe bool
}

// HasNetwork reports whether the profile's sandboxes reach the network
// (through the host's egress proxy, never directly).
func (p Profile) HasNetwork() bool { return p.Network == NetworkAllowlist }

// ProfileName is the profile g runs under.
func (g Group) ProfileName() string {
	if g.Profile == "" {
		return DefaultProfile
	}
	return g.Profile
}
