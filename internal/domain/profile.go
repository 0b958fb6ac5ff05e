package domain

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"
)

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
	// Credentials are the headers the egress proxy sets on requests to
	// their hosts, which the egress list allows.
	Credentials []Credential
	// Runtime is RuntimeGVisor for runs under gVisor whatever the host's
	// backend; "" is the host's backend ("runtime": "default").
	Runtime string
}

// Runtimes a profile may ask for.
const (
	RuntimeDefault = "default"
	RuntimeGVisor  = "gvisor"
)

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

// Credential is a header the host's egress proxy sets on every request to
// one host (DESIGN.md, "Credentials for outside services"): the sandbox
// never holds the value, which the host reads from its own environment at
// each request.
type Credential struct {
	Host   string // lower-case host name, or an IP address (IPv6 without brackets)
	Port   uint16 // 443 unless the profile names another
	Header string // canonical header name (textproto.CanonicalMIMEHeaderKey)
	Value  string // template: ${NAME} parts are the host's variables
}

// Authority is host:port as a CONNECT request names it.
func (c Credential) Authority() string {
	return net.JoinHostPort(c.Host, strconv.Itoa(int(c.Port)))
}

// Vars are the variables the value names, in order, each once.
func (c Credential) Vars() []string {
	var out []string
	for _, p := range parseTemplate(c.Value) {
		if p.isVar && !slices.Contains(out, p.text) {
			out = append(out, p.text)
		}
	}
	return out
}

// Expand is the value with each ${NAME} replaced by getenv(NAME). A
// variable that is empty, or whose value could split a header (a control
// character), is an error naming the variable, never its value.
func (c Credential) Expand(getenv func(string) string) (string, error) {
	var b strings.Builder
	for _, p := range parseTemplate(c.Value) {
		if !p.isVar {
			b.WriteString(p.text)
			continue
		}
		v := getenv(p.text)
		if v == "" {
			return "", fmt.Errorf("%s is not set in the host's environment", p.text)
		}
		for i := 0; i < len(v); i++ {
			if v[i] < ' ' && v[i] != '\t' || v[i] == 0x7f {
				return "", fmt.Errorf("%s holds a control character, which no header value may", p.text)
			}
		}
		b.WriteString(v)
	}
	return b.String(), nil
}

// templatePart is literal text or a variable's name.
type templatePart struct {
	text  string
	isVar bool
}

// ParseTemplate checks a credential value: printable ASCII, with at least
// one ${NAME} (NAME of letters, digits and '_', not starting with a digit),
// and no other '$'.
func ParseTemplate(v string) error {
	if v == "" {
		return errors.New("empty")
	}
	vars := 0
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '$':
			end := strings.IndexByte(v[i:], '}')
			if !strings.HasPrefix(v[i:], "${") || end < 0 || !envName(v[i+2:i+end]) {
				return fmt.Errorf("%q: write a variable as ${NAME} (letters, digits, '_')", v)
			}
			vars++
			i += end
		case c < ' ' || c > '~':
			return fmt.Errorf("%q: only printable ASCII may be written around the variables", v)
		}
	}
	if vars == 0 {
		return errors.New("names no variable: put the secret in the host's environment and write ${NAME}, never the secret itself")
	}
	return nil
}

// parseTemplate splits a value ParseTemplate accepted.
func parseTemplate(v string) []templatePart {
	var out []templatePart
	for v != "" {
		i := strings.Index(v, "${")
		end := strings.IndexByte(v[max(i, 0):], '}')
		if i < 0 || end < 0 {
			return append(out, templatePart{text: v})
		}
		if i > 0 {
			out = append(out, templatePart{text: v[:i]})
		}
		out = append(out, templatePart{text: v[i+2 : i+end], isVar: true})
		v = v[i+end+1:]
	}
	return out
}

func envName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
