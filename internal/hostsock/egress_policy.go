package hostsock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// The egress policy (DESIGN.md, "Egress proxy"): what a sandbox asks to
// reach, parsed strictly; the profile's egress entries it may match; and
// the address classes no name may lead to. Pure functions and data, so
// every cell is a unit test.

// egressTarget is a destination as the sandbox named it: a host name or an
// IP literal, never both.
type egressTarget struct {
	Host string     // lower-case host name; "" for an IP literal
	IP   netip.Addr // valid for an IP literal
	Port uint16     // 0: none was given
}

func (t egressTarget) String() string {
	host := t.Host
	if t.IP.IsValid() {
		host = t.IP.String()
	}
	if t.Port == 0 {
		if t.IP.Is6() {
			return "[" + host + "]"
		}
		return host
	}
	return net.JoinHostPort(host, strconv.Itoa(int(t.Port)))
}

// errTarget is a destination that is not host[:port] at all.
var errTarget = errors.New("not host:port")

// parseAuthority parses host[:port] as written in a CONNECT request line or
// a URL: a host name, a dotted-quad IPv4 address, or an IPv6 address in
// brackets. Anything a resolver or a libc might read as an address in some
// other notation (127.1, 2130706433, 0x7f000001, 0177.0.0.1) is refused
// here, never handed to a resolver: what is checked must be what is dialled.
func parseAuthority(s string) (egressTarget, error) {
	var t egressTarget
	if s == "" || len(s) > 262 {
		return t, errTarget
	}
	for i := 0; i < len(s); i++ {
		// No spaces, controls, non-ASCII, paths, user info, zones or
		// percent-encoding: none belongs in a host[:port].
		if c := s[i]; c <= ' ' || c >= 0x7f || strings.IndexByte(`/\@%?#,;"'<>{}|^`+"`", c) >= 0 {
			return t, errTarget
		}
	}
	host, port := s, ""
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return t, errTarget
		}
		host, port = s[1:end], s[end+1:]
		if port != "" {
			if port[0] != ':' {
				return t, errTarget
			}
			port = port[1:]
			if port == "" {
				return t, errTarget
			}
		}
		ip, err := netip.ParseAddr(host)
		if err != nil || !ip.Is6() || ip.Zone() != "" {
			return t, fmt.Errorf("%s is not an IPv6 address", host)
		}
		t.IP = ip
	} else {
		switch strings.Count(s, ":") {
		case 0:
		case 1:
			host, port, _ = strings.Cut(s, ":")
			if port == "" {
				return t, errTarget
			}
		default:
			return t, fmt.Errorf("%w (write IPv6 addresses in brackets)", errTarget)
		}
		if ip, err := netip.ParseAddr(host); err == nil && ip.Is4() {
			t.IP = ip
		} else if err := checkHostName(host); err != nil {
			return t, err
		} else {
			t.Host = strings.TrimSuffix(strings.ToLower(host), ".")
		}
	}
	if port != "" {
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil || n == 0 || len(port) > 5 {
			return t, fmt.Errorf("port %s: want 1 to 65535", port)
		}
		t.Port = uint16(n)
	}
	return t, nil
}

// checkHostName accepts a DNS host name (letters, digits, hyphens, one
// optional trailing dot) that cannot be mistaken for an address: like a
// browser, a name whose last label is a number (decimal or 0x-hex) is an
// address in some notation, and is refused.
// Its errors may quote host: the caller has let only characters of
// host[:port] through.
func checkHostName(host string) error {
	name := strings.TrimSuffix(host, ".")
	if name == "" || len(name) > 253 {
		return fmt.Errorf("%s is not a host name", host)
	}
	labels := strings.Split(name, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return fmt.Errorf("%s is not a host name", host)
		}
		for i := 0; i < len(l); i++ {
			c := l[i] | 0x20 // lower case for letters
			if !(c >= 'a' && c <= 'z' || l[i] >= '0' && l[i] <= '9' || l[i] == '-') {
				return fmt.Errorf("%s is not a host name", host)
			}
		}
	}
	if numericLabel(labels[len(labels)-1]) {
		return fmt.Errorf("%s is an address in a non-standard notation, not a host name (write IPv4 as a.b.c.d)", host)
	}
	return nil
}

// numericLabel: all decimal digits, or 0x followed by hex digits (or none).
func numericLabel(l string) bool {
	if len(l) >= 2 && l[0] == '0' && (l[1] == 'x' || l[1] == 'X') {
		l = l[2:]
		for i := 0; i < len(l); i++ {
			c := l[i] | 0x20
			if !(l[i] >= '0' && l[i] <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
		return true
	}
	for i := 0; i < len(l); i++ {
		if l[i] < '0' || l[i] > '9' {
			return false
		}
	}
	return l != ""
}

// egressRule is one entry of a profile's egress list.
type egressRule struct {
	text   string
	any    bool       // "*": any public host
	suffix string     // "*.example.org": ".example.org"
	host   string     // an exact host name
	ip     netip.Addr // an IP literal: that address, whatever its class
	port   uint16     // 0: 80 and 443
}

// parseEgressRule reads an entry the profiles file already validated; it
// parses it again strictly, so that the proxy never acts on a looser reading.
func parseEgressRule(entry string) (egressRule, error) {
	r := egressRule{text: entry}
	if entry == "*" {
		r.any = true
		return r, nil
	}
	wild := strings.HasPrefix(entry, "*.")
	t, err := parseAuthority(strings.TrimPrefix(entry, "*."))
	if err != nil {
		return r, fmt.Errorf("egress entry %q: %w", entry, err)
	}
	r.port = t.Port
	switch {
	case wild && t.IP.IsValid():
		return r, fmt.Errorf("egress entry %q: a wildcard needs a host name", entry)
	case wild:
		r.suffix = "." + t.Host
	case t.IP.IsValid():
		r.ip = t.IP
	default:
		r.host = t.Host
	}
	return r, nil
}

func (r egressRule) portMatches(p uint16) bool {
	if r.port == 0 {
		return p == 80 || p == 443
	}
	return r.port == p
}

// egressPolicy is a profile's egress list, parsed.
type egressPolicy struct {
	network bool
	rules   []egressRule
}

// newEgressPolicy parses entries; a malformed one is dropped (it grants
// nothing) and reported.
func newEgressPolicy(network bool, entries []string) (egressPolicy, []error) {
	p := egressPolicy{network: network}
	var errs []error
	for _, e := range entries {
		r, err := parseEgressRule(e)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		p.rules = append(p.rules, r)
	}
	return p, errs
}

// match finds the rule that admits t (whose port is set). literal reports
// that t is an IP literal listed as exactly that address, which admits it
// whatever its class; any other match admits only public addresses.
func (p egressPolicy) match(t egressTarget) (rule egressRule, literal, ok bool) {
	for _, r := range p.rules {
		if !r.portMatches(t.Port) {
			continue
		}
		if t.IP.IsValid() && r.ip.IsValid() && r.ip == t.IP {
			return r, true, true
		}
	}
	for _, r := range p.rules {
		if !r.portMatches(t.Port) {
			continue
		}
		switch {
		case r.any:
			return r, false, true
		case t.IP.IsValid():
		case r.host != "" && r.host == t.Host,
			r.suffix != "" && strings.HasSuffix(t.Host, r.suffix):
			return r, false, true
		}
	}
	return egressRule{}, false, false
}

// Resolver looks up a host name's addresses (net.DefaultResolver; tests
// inject their own).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// denial is a refusal of the egress policy: its text follows "denied: ".
type denial struct{ reason string }

func (d *denial) Error() string { return d.reason }

func deny(format string, a ...any) error { return &denial{fmt.Sprintf(format, a...)} }

// decide checks t against the policy and answers the addresses to dial:
// the literal itself, or what the host resolved the name to, once (no
// second lookup at dial time, so a rebinding name cannot redirect it). own
// lists the host's own addresses as they are now: those are the host
// itself, reached by an entry naming exactly that address only, as
// loopback is. A *denial is a refusal; any other error is a failed lookup.
func (p egressPolicy) decide(ctx context.Context, res Resolver, own func() ([]netip.Addr, error), t egressTarget) ([]netip.Addr, egressRule, error) {
	if !p.network {
		return nil, egressRule{}, deny("this group's sandbox profile has no network")
	}
	rule, literal, ok := p.match(t)
	if !ok {
		return nil, rule, deny("%s is not in this group's egress list", t)
	}
	if t.IP.IsValid() {
		if literal {
			return []netip.Addr{t.IP.Unmap()}, rule, nil
		}
		if class := nonPublic(t.IP); class != "" {
			return nil, rule, deny("%s is %s address; only an egress entry naming exactly that address allows it", t, article(class))
		}
		if _, mine, err := hostOwns(own, []netip.Addr{t.IP}); err != nil {
			return nil, rule, err
		} else if mine {
			return nil, rule, deny("%s is an address of this host; only an egress entry naming exactly that address allows it", t)
		}
		return []netip.Addr{t.IP.Unmap()}, rule, nil
	}
	addrs, err := res.LookupNetIP(ctx, "ip", t.Host)
	if err != nil {
		return nil, rule, fmt.Errorf("cannot resolve %s: %w", t.Host, err)
	}
	if len(addrs) == 0 {
		return nil, rule, fmt.Errorf("cannot resolve %s: no addresses", t.Host)
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		// Any one address of another class refuses the name: a name that
		// mixes them is an attempt, not a misconfiguration to work around.
		if class := nonPublic(a); class != "" {
			return nil, rule, deny("%s resolves to %s, %s address", t.Host, a, article(class))
		}
		out = append(out, a.Unmap())
	}
	if a, mine, err := hostOwns(own, out); err != nil {
		return nil, rule, err
	} else if mine {
		return nil, rule, deny("%s resolves to %s, an address of this host", t.Host, a)
	}
	return out, rule, nil
}

// hostOwns finds the first of addrs (public addresses: the others are
// refused before) that is one of the host's own, listed by own once, now.
// Mapped and NAT64 forms are judged as the IPv4 address they carry, as in
// nonPublic.
func hostOwns(own func() ([]netip.Addr, error), addrs []netip.Addr) (netip.Addr, bool, error) {
	mine, err := own()
	if err != nil {
		return netip.Addr{}, false, fmt.Errorf("cannot list this host's own addresses: %w", err)
	}
	for _, a := range addrs {
		a = a.Unmap().WithZone("")
		b := a
		if nat64.Contains(a) {
			x := a.As16()
			b = netip.AddrFrom4([4]byte(x[12:]))
		}
		for _, m := range mine {
			if m = m.Unmap().WithZone(""); m == a || m == b {
				return a, true, nil
			}
		}
	}
	return netip.Addr{}, false, nil
}

// article puts "a" or "an" before an address class.
func article(class string) string {
	if strings.ContainsRune("aeiouAEIOU", rune(class[0])) {
		return "an " + class
	}
	return "a " + class
}

// Address ranges no egress connection reaches unless listed literally,
// besides what netip classifies (loopback, private, link-local, multicast,
// unspecified).
var blockedRanges = func() []struct {
	p     netip.Prefix
	class string
} {
	type r = struct {
		p     netip.Prefix
		class string
	}
	list := []struct{ cidr, class string }{
		{"255.255.255.255/32", "broadcast"},
		{"0.0.0.0/8", "this-network"},
		{"100.64.0.0/10", "CGNAT"},
		{"192.0.0.0/24", "IETF protocol"},
		{"192.0.2.0/24", "documentation"},
		{"198.51.100.0/24", "documentation"},
		{"203.0.113.0/24", "documentation"},
		{"198.18.0.0/15", "benchmarking"},
		{"192.88.99.0/24", "6to4 relay"},
		{"240.0.0.0/4", "reserved"},
		{"::/96", "IPv4-compatible"},
		{"64:ff9b:1::/48", "local NAT64"},
		{"100::/64", "discard"},
		{"2001::/23", "IETF protocol (Teredo)"},
		{"2001:db8::/32", "documentation"},
		{"3fff::/20", "documentation"},
		{"2002::/16", "6to4"},
		{"fec0::/10", "site-local"},
	}
	out := make([]r, len(list))
	for i, l := range list {
		out[i] = r{netip.MustParsePrefix(l.cidr), l.class}
	}
	return out
}()

// nat64 is the well-known NAT64 prefix: its addresses are IPv4 addresses
// in disguise, judged as those.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// nonPublic names a's class when a is not a public unicast address, and
// answers "" when it is. IPv4-mapped and NAT64 forms are judged as the IPv4
// address they carry.
func nonPublic(a netip.Addr) string {
	a = a.Unmap().WithZone("")
	if nat64.Contains(a) {
		b := a.As16()
		if c := nonPublic(netip.AddrFrom4([4]byte(b[12:]))); c != "" {
			return c + " (NAT64)"
		}
		return ""
	}
	switch {
	case !a.IsValid():
		return "invalid"
	case a.IsUnspecified():
		return "unspecified"
	case a.IsLoopback():
		return "loopback"
	case a.IsLinkLocalUnicast():
		return "link-local"
	case a.IsMulticast():
		return "multicast"
	case a.IsPrivate():
		return "private"
	}
	for _, b := range blockedRanges {
		if b.p.Contains(a) {
			return b.class
		}
	}
	if !a.IsGlobalUnicast() {
		return "reserved"
	}
	return ""
}
