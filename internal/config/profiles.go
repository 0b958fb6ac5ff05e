package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/clawpen/clawpen/internal/domain"
)

// ErrNoProfiles is a profiles file that does not exist: only the built-in
// default profile is defined.
var ErrNoProfiles = errors.New("no profiles file")

// Profiles is the admin's profiles file (DESIGN.md "Sandbox profiles"),
// validated.
type Profiles struct {
	Path   string
	byName map[string]domain.Profile
}

// Bounds of profile fields: wide enough for any real use, narrow enough
// that a typo (a memory_mb in bytes, a timeout of "10h0m" meant as 10m)
// is caught rather than granted.
const (
	maxProfilesFile = 1 << 20
	minMemoryMB     = 64
	maxMemoryMB     = 1 << 20
	minPids         = 16
	maxPids         = 1 << 16
	maxCPUs         = 1024
	minTimeout      = 5 * time.Second
	maxTimeout      = 24 * time.Hour
	minDiskMB       = 1
	maxDiskMB       = 1 << 24
	maxEgress       = 256
	maxTools        = 256
	maxCredentials  = 64
)

var (
	profileName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)
	toolName    = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	hostLabel   = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
	// modelName is what providers name models: claude-haiku-4-5,
	// gpt-4.1-mini, llama3:latest, meta-llama/Llama-3-8b.
	modelName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,127}$`)
)

// LoadProfiles reads and validates the profiles file at path. A missing
// file is ErrNoProfiles with an empty set. Every other problem is an
// error naming the file, and where it lies, the profile and the field.
func LoadProfiles(path string) (Profiles, error) {
	p := Profiles{Path: path, byName: map[string]domain.Profile{}}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return p, fmt.Errorf("profiles file %s: %w", path, ErrNoProfiles)
	}
	if err != nil {
		return p, fmt.Errorf("profiles file %s: %w", path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxProfilesFile+1))
	if err != nil {
		return p, fmt.Errorf("profiles file %s: %w", path, err)
	}
	if len(data) > maxProfilesFile {
		return p, fmt.Errorf("profiles file %s: larger than %d bytes", path, maxProfilesFile)
	}
	byName, err := ParseProfiles(data)
	if err != nil {
		return p, fmt.Errorf("profiles file %s: %w", path, err)
	}
	p.byName = byName
	return p, nil
}

// ParseProfiles validates a profiles file's content; its errors name the
// profile and the field, not the file (LoadProfiles adds it).
func ParseProfiles(data []byte) (map[string]domain.Profile, error) {
	var top struct {
		Profiles map[string]jsontext.Value `json:"profiles"`
	}
	if err := json.Unmarshal(data, &top, json.RejectUnknownMembers(true)); err != nil {
		return nil, fmt.Errorf("not a profiles file: %w", err)
	}
	if top.Profiles == nil {
		return nil, errors.New(`no "profiles" object`)
	}
	out := make(map[string]domain.Profile, len(top.Profiles))
	for name, raw := range top.Profiles {
		if name == domain.DefaultProfile {
			return nil, fmt.Errorf("profile %q: built in (no network, default limits); give yours another name", name)
		}
		if !profileName.MatchString(name) {
			return nil, fmt.Errorf("profile %q: want a name of 1-32 lower-case letters, digits, '-' or '_'", name)
		}
		p, err := parseProfile(raw)
		if err != nil {
			return nil, fmt.Errorf("profile %q: %w", name, err)
		}
		p.Name = name
		out[name] = p
	}
	return out, nil
}

// parseProfile reads one profile's fields; errors name the field.
func parseProfile(raw jsontext.Value) (domain.Profile, error) {
	p := domain.Profile{Network: domain.NetworkNone}
	var fields map[string]jsontext.Value
	if err := json.Unmarshal(raw, &fields); err != nil {
		return p, fmt.Errorf("want an object: %w", err)
	}
	for _, key := range sortedKeys(fields) {
		if err := setField(&p, key, fields[key]); err != nil {
			return p, fmt.Errorf("field %q: %w", key, err)
		}
	}
	if len(p.Egress) > 0 && !p.HasNetwork() {
		return p, errors.New(`field "egress": given, but "network" is not "allowlist"`)
	}
	if p.EgressAsk && !p.HasNetwork() {
		return p, errors.New(`field "egress_ask": true, but "network" is not "allowlist"`)
	}
	for _, c := range p.Credentials {
		if !egressAllows(p.Egress, c.Host, c.Port) {
			return p, fmt.Errorf(`field "credentials": %s is not allowed by "egress": list it there too`, c.Authority())
		}
	}
	return p, nil
}

func setField(p *domain.Profile, key string, raw jsontext.Value) error {
	switch key {
	case "network":
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return err
		}
		if s != domain.NetworkNone && s != domain.NetworkAllowlist {
			return fmt.Errorf("%q: want %q or %q", s, domain.NetworkNone, domain.NetworkAllowlist)
		}
		p.Network = s
	case "egress":
		if err := json.Unmarshal(raw, &p.Egress); err != nil {
			return err
		}
		if len(p.Egress) > maxEgress {
			return fmt.Errorf("more than %d entries", maxEgress)
		}
		for _, e := range p.Egress {
			if err := ValidEgress(e); err != nil {
				return err
			}
		}
	case "memory_mb":
		return intIn(raw, &p.MemoryMB, minMemoryMB, maxMemoryMB)
	case "pids":
		var n int64
		if err := intIn(raw, &n, minPids, maxPids); err != nil {
			return err
		}
		p.Pids = int(n)
	case "cpus":
		if err := json.Unmarshal(raw, &p.CPUs); err != nil {
			return err
		}
		if math.IsNaN(p.CPUs) || p.CPUs < 0.01 || p.CPUs > maxCPUs {
			return fmt.Errorf("%v: want a number of CPUs from 0.01 to %d", p.CPUs, maxCPUs)
		}
	case "timeout":
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return err
		}
		d, err := time.ParseDuration(s)
		if err != nil || d < minTimeout || d > maxTimeout {
			return fmt.Errorf("%q: want a duration from %s to %s, like \"15m\"", s, minTimeout, maxTimeout)
		}
		p.Timeout = d
	case "disk_mb":
		return intIn(raw, &p.DiskMB, minDiskMB, maxDiskMB)
	case "tools":
		if err := json.Unmarshal(raw, &p.Tools); err != nil {
			return err
		}
		if len(p.Tools) > maxTools {
			return fmt.Errorf("more than %d entries", maxTools)
		}
		for _, t := range p.Tools {
			if !toolName.MatchString(t) {
				return fmt.Errorf("%q: want a tool name of letters, digits, '-' or '_'", t)
			}
		}
	case "daily_tokens":
		return intIn(raw, &p.DailyTokens, 1, math.MaxInt64)
	case "egress_ask":
		return json.Unmarshal(raw, &p.EgressAsk)
	case "model":
		if err := json.Unmarshal(raw, &p.Model); err != nil {
			return err
		}
		if !modelName.MatchString(p.Model) {
			return fmt.Errorf("%q: want a model name like claude-haiku-4-5 (letters, digits and . _ : / @ + -, at most 128)", p.Model)
		}
	case "transcribe":
		var on bool
		if err := json.Unmarshal(raw, &on); err != nil {
			return fmt.Errorf("%s: want true or false", raw)
		}
		p.NoTranscribe = !on
	case "credentials":
		return parseCredentials(raw, p)
	case "runtime":
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return err
		}
		switch s {
		case domain.RuntimeDefault:
		case domain.RuntimeGVisor:
			p.Runtime = s
		default:
			return fmt.Errorf("%q: want %q or %q", s, domain.RuntimeDefault, domain.RuntimeGVisor)
		}
	default:
		return errors.New("unknown field (network, egress, egress_ask, memory_mb, pids, cpus, timeout, disk_mb, tools, daily_tokens, model, transcribe, credentials, runtime)")
	}
	return nil
}

// intIn reads a whole number from min to max into dst.
func intIn(raw jsontext.Value, dst *int64, lo, hi int64) error {
	var n int64
	if err := json.Unmarshal(raw, &n); err != nil {
		return fmt.Errorf("%s: want a whole number", raw)
	}
	if n < lo || n > hi {
		return fmt.Errorf("%d: want %d to %d", n, lo, hi)
	}
	*dst = n
	return nil
}

// ValidEgress checks the syntax of one egress entry: "*", or a host name
// (optionally "*."-prefixed) or IP literal, with an optional ":port"
// (IPv6 literals in brackets).
func ValidEgress(entry string) error {
	if entry == "*" {
		return nil
	}
	host, port := entry, ""
	if h, p, err := net.SplitHostPort(entry); err == nil {
		host, port = h, p
	} else if strings.HasPrefix(entry, "[") || strings.Count(entry, ":") == 1 {
		return fmt.Errorf("egress %q: want host[:port]", entry)
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("egress %q: port %q: want 1 to 65535", entry, port)
		}
	}
	if net.ParseIP(host) != nil {
		return nil
	}
	name := strings.TrimPrefix(host, "*.")
	if name != strings.ToLower(name) {
		return fmt.Errorf("egress %q: write host names in lower case", entry)
	}
	labels := strings.Split(name, ".")
	if len(name) > 253 || len(labels) < 2 && name != "localhost" {
		return fmt.Errorf("egress %q: want a full host name like example.org", entry)
	}
	for _, l := range labels {
		if !hostLabel.MatchString(l) {
			return fmt.Errorf("egress %q: %q is not a host name label", entry, l)
		}
	}
	return nil
}

// Names lists the defined profiles, sorted, the built-in default first.
func (p Profiles) Names() []string {
	return append([]string{domain.DefaultProfile}, sortedKeys(p.byName)...)
}

// Get is the profile called name; the built-in default is always there.
func (p Profiles) Get(name string) (domain.Profile, bool) {
	if name == "" || name == domain.DefaultProfile {
		return domain.Profile{Name: domain.DefaultProfile, Network: domain.NetworkNone}, true
	}
	prof, ok := p.byName[name]
	return prof, ok
}

// ResolveProfile reads the file at path and returns the profile called
// name. The built-in default needs no file and is given even while the
// file is missing or malformed; any other name fails closed when the file
// cannot be read or does not define it.
func ResolveProfile(path, name string) (domain.Profile, error) {
	if name == "" || name == domain.DefaultProfile {
		p, _ := Profiles{}.Get(name)
		return p, nil
	}
	return ReadProfiles(path).Resolve(name)
}

// ProfilesNow is the profiles file as one reading found it: what it
// defines and what went wrong reading it. Every check that names several
// groups (assignment, /groups, /status, doctor, `profiles check`) judges
// them all against one reading.
type ProfilesNow struct {
	Profiles
	// Err is nil, ErrNoProfiles (wrapped) for a missing file, or why the
	// file cannot be used.
	Err error
}

// ReadProfiles reads the file at path now.
func ReadProfiles(path string) ProfilesNow {
	p, err := LoadProfiles(path)
	return ProfilesNow{Profiles: p, Err: err}
}

// Missing reports whether there is no file: only the default is defined.
func (n ProfilesNow) Missing() bool { return errors.Is(n.Err, ErrNoProfiles) }

// Broken is why the file, which exists, cannot be used (nil: it can, or
// there is none). While it is broken only the default can be used.
func (n ProfilesNow) Broken() error {
	if n.Err == nil || n.Missing() {
		return nil
	}
	return n.Err
}

// Resolve is the profile called name, as ResolveProfile gives it.
func (n ProfilesNow) Resolve(name string) (domain.Profile, error) {
	if name == "" || name == domain.DefaultProfile {
		p, _ := n.Get(name)
		return p, nil
	}
	if n.Err != nil {
		return domain.Profile{}, n.Err
	}
	p, ok := n.Get(name)
	if !ok {
		return domain.Profile{}, fmt.Errorf("profile %q is not defined in %s", name, n.Path)
	}
	return p, nil
}

// Unusable lists, by folder, the groups among gs whose profile cannot be
// used now (they run nothing), with why.
func (n ProfilesNow) Unusable(gs []domain.Group) map[string]error {
	out := map[string]error{}
	for _, g := range gs {
		if _, err := n.Resolve(g.ProfileName()); err != nil {
			out[g.Folder] = err
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
