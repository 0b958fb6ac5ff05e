package hostsock

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseAuthority(t *testing.T) {
	tests := []struct {
		in      string
		host    string
		ip      string
		port    uint16
		wantErr string
	}{
		{in: "example.org", host: "example.org"},
		{in: "Example.ORG.:443", host: "example.org", port: 443},
		{in: "a-b.example.org:8080", host: "a-b.example.org", port: 8080},
		{in: "localhost", host: "localhost"},
		{in: "127.0.0.2:8443", ip: "127.0.0.2", port: 8443},
		{in: "169.254.169.254", ip: "169.254.169.254"},
		{in: "[::1]:443", ip: "::1", port: 443},
		{in: "[::ffff:127.0.0.1]:80", ip: "::ffff:127.0.0.1", port: 80},
		{in: "[2001:db8::1]", ip: "2001:db8::1"},
		{in: "1.2.3.4.nip.io", host: "1.2.3.4.nip.io"},

		// Other notations of addresses are not host names.
		{in: "127.1", wantErr: "non-standard notation"},
		{in: "127.1:80", wantErr: "non-standard notation"},
		{in: "2130706433", wantErr: "non-standard notation"},
		{in: "0x7f000001", wantErr: "non-standard notation"},
		{in: "0X7F.0.0.1", wantErr: "non-standard notation"},
		{in: "0177.0.0.1", wantErr: "non-standard notation"},
		{in: "127.0.0.01", wantErr: "non-standard notation"},
		{in: "127.0.0.1.", wantErr: "non-standard notation"},
		{in: "1.2.3", wantErr: "non-standard notation"},
		{in: "example.0x1", wantErr: "non-standard notation"},
		{in: "[127.0.0.1]", wantErr: "not an IPv6 address"},
		{in: "[fe80::1%25eth0]", wantErr: "not host:port"},
		{in: "[::1", wantErr: "not host:port"},
		{in: "[::1]x", wantErr: "not host:port"},
		{in: "[::1]:", wantErr: "not host:port"},
		{in: "::1", wantErr: "brackets"},
		{in: "::ffff:127.0.0.1", wantErr: "brackets"},

		// Not host[:port] at all.
		{in: "", wantErr: "not host:port"},
		{in: "/run/clawpen/host.sock", wantErr: "not host:port"},
		{in: "unix:/run/clawpen/host.sock", wantErr: "not host:port"},
		{in: "user@example.org", wantErr: "not host:port"},
		{in: "exa mple.org", wantErr: "not host:port"},
		{in: "example.org\r\nX: y", wantErr: "not host:port"},
		{in: "exämple.org", wantErr: "not host:port"},
		{in: "example.org:", wantErr: "not host:port"},
		{in: "example.org:0", wantErr: "port"},
		{in: "example.org:65536", wantErr: "port"},
		{in: "example.org:+80", wantErr: "port"},
		{in: "example.org:0080x", wantErr: "port"},
		{in: "-x.example.org", wantErr: "not a host name"},
		{in: "x..org", wantErr: "not a host name"},
		{in: "under_score.org", wantErr: "not a host name"},
		{in: "*.example.org", wantErr: "not a host name"},
		{in: strings.Repeat("a", 64) + ".org", wantErr: "not a host name"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseAuthority(tt.in)
			if tt.wantErr != "" {
				require.Error(t, err, "parsed as %+v", got)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.host, got.Host)
			if tt.ip != "" {
				assert.Equal(t, netip.MustParseAddr(tt.ip), got.IP)
			} else {
				assert.False(t, got.IP.IsValid())
			}
			assert.Equal(t, tt.port, got.Port)
		})
	}
}

func TestNonPublic(t *testing.T) {
	tests := []struct{ addr, class string }{
		{"93.184.215.14", ""},
		{"8.8.8.8", ""},
		{"2606:4700::1111", ""},
		{"::ffff:8.8.8.8", ""},
		{"64:ff9b::808:808", ""}, // NAT64 of 8.8.8.8
		{"127.0.0.1", "loopback"},
		{"127.0.0.2", "loopback"},
		{"::1", "loopback"},
		{"::ffff:127.0.0.1", "loopback"},
		{"64:ff9b::7f00:1", "loopback (NAT64)"},
		{"64:ff9b::a9fe:a9fe", "link-local (NAT64)"},
		{"10.1.2.3", "private"},
		{"172.16.0.1", "private"},
		{"192.168.1.1", "private"},
		{"fd00::1", "private"},
		{"::ffff:10.0.0.1", "private"},
		{"169.254.169.254", "link-local"},
		{"::ffff:169.254.169.254", "link-local"},
		{"fe80::1", "link-local"},
		{"100.64.0.1", "CGNAT"},
		{"100.127.255.255", "CGNAT"},
		{"224.0.0.1", "multicast"},
		{"239.255.255.250", "multicast"},
		{"ff02::1", "multicast"},
		{"0.0.0.0", "unspecified"},
		{"::", "unspecified"},
		{"0.1.2.3", "this-network"},
		{"255.255.255.255", "broadcast"},
		{"240.0.0.1", "reserved"},
		{"192.0.0.8", "IETF protocol"},
		{"192.0.2.1", "documentation"},
		{"198.18.0.1", "benchmarking"},
		{"::127.0.0.1", "IPv4-compatible"},
		{"64:ff9b:1::1", "local NAT64"},
		{"2001::1", "IETF protocol (Teredo)"},
		{"2001:db8::1", "documentation"},
		{"2002:7f00:1::1", "6to4"},
		{"fec0::1", "site-local"},
		{"100::1", "discard"},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			assert.Equal(t, tt.class, nonPublic(netip.MustParseAddr(tt.addr)))
		})
	}
}

// fakeResolver answers from a table; a name not in it fails.
type fakeResolver map[string][]string

func (f fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	as, ok := f[host]
	if !ok {
		return nil, errors.New("no such host")
	}
	var out []netip.Addr
	for _, a := range as {
		out = append(out, netip.MustParseAddr(a))
	}
	return out, nil
}

func TestEgressDecide(t *testing.T) {
	res := fakeResolver{
		"example.org":      {"93.184.215.14"},
		"www.example.org":  {"93.184.215.15", "2606:2800::1"},
		"api.github.com":   {"140.82.112.5"},
		"github.com":       {"140.82.112.3"},
		"localhost":        {"127.0.0.1", "::1"},
		"rebind.evil.test": {"93.184.215.14", "10.0.0.1"},
		"meta.evil.test":   {"169.254.169.254"},
		"mapped.evil.test": {"::ffff:127.0.0.1"},
		"nat64.evil.test":  {"64:ff9b::7f00:1"},
		"cgnat.evil.test":  {"100.64.1.1"},
		"pypi.org":         {"151.101.0.223"},
		"own.example.net":  {"93.184.216.99"},
		"half-own.test":    {"93.184.215.14", "2606:2800::99"},
	}
	// This host's own interfaces: public addresses, as a server's may be.
	own := hostAddrs("93.184.216.99", "2606:2800::99", "127.0.0.1", "10.0.0.5")
	entries := []string{"example.org", "*.example.org:443", "*.github.com", "127.0.0.2:8443", "[::1]:9000",
		"localhost", "rebind.evil.test", "meta.evil.test", "mapped.evil.test", "nat64.evil.test", "cgnat.evil.test",
		"10.0.0.7", "169.254.169.254:80"}
	p, errs := newEgressPolicy(true, entries)
	require.Empty(t, errs)
	any, errs := newEgressPolicy(true, []string{"*"})
	require.Empty(t, errs)
	ownListed, errs := newEgressPolicy(true, []string{"*", "93.184.216.99:443", "[2606:2800::99]:80"})
	require.Empty(t, errs)
	none, _ := newEgressPolicy(false, entries)

	tests := []struct {
		name   string
		policy egressPolicy
		target string
		want   []string // the addresses to dial; nil: refused
		reason string   // part of the refusal
	}{
		{"listed name, port 443", p, "example.org:443", []string{"93.184.215.14"}, ""},
		{"listed name, port 80", p, "example.org:80", []string{"93.184.215.14"}, ""},
		{"listed name, other port", p, "example.org:8080", nil, "not in this group's egress list"},
		{"wildcard subdomain", p, "www.example.org:443", []string{"93.184.215.15", "2606:2800::1"}, ""},
		{"wildcard with its port only", p, "www.example.org:80", nil, "not in this group's egress list"},
		{"wildcard is not the bare domain", p, "github.com:443", nil, "not in this group's egress list"},
		{"wildcard subdomain, default ports", p, "api.github.com:80", []string{"140.82.112.5"}, ""},
		{"suffix is not a subdomain", p, "evilexample.org:443", nil, "not in this group's egress list"},
		{"unlisted name", p, "pypi.org:443", nil, "not in this group's egress list"},
		{"IP literal listed exactly", p, "127.0.0.2:8443", []string{"127.0.0.2"}, ""},
		{"IP literal, other port", p, "127.0.0.2:8444", nil, "not in this group's egress list"},
		{"IPv6 literal listed exactly", p, "[::1]:9000", []string{"::1"}, ""},
		{"private literal listed on default ports", p, "10.0.0.7:443", []string{"10.0.0.7"}, ""},
		{"metadata literal listed exactly", p, "169.254.169.254:80", []string{"169.254.169.254"}, ""},
		{"loopback literal not listed", p, "127.0.0.1:8443", nil, "not in this group's egress list"},
		{"mapped form of a listed literal", p, "[::ffff:127.0.0.2]:8443", nil, "not in this group's egress list"},
		{"name resolving to loopback", p, "localhost:443", nil, "a loopback address"},
		{"name resolving partly private", p, "rebind.evil.test:443", nil, "10.0.0.1, a private address"},
		{"name resolving to metadata", p, "meta.evil.test:80", nil, "a link-local address"},
		{"name resolving to mapped loopback", p, "mapped.evil.test:443", nil, "a loopback address"},
		{"name resolving to NAT64 loopback", p, "nat64.evil.test:443", nil, "loopback (NAT64)"},
		{"name resolving to CGNAT", p, "cgnat.evil.test:443", nil, "CGNAT"},
		{"star: public name", any, "pypi.org:443", []string{"151.101.0.223"}, ""},
		{"star: public literal", any, "8.8.8.8:443", []string{"8.8.8.8"}, ""},
		{"star: other port", any, "pypi.org:22", nil, "not in this group's egress list"},
		{"star: loopback literal", any, "127.0.0.1:443", nil, "loopback address"},
		{"star: mapped loopback literal", any, "[::ffff:127.0.0.1]:443", nil, "loopback address"},
		{"star: IPv6 loopback", any, "[::1]:443", nil, "loopback address"},
		{"star: metadata", any, "169.254.169.254:80", nil, "link-local address"},
		{"star: unspecified", any, "0.0.0.0:80", nil, "unspecified address"},
		{"star: broadcast", any, "255.255.255.255:80", nil, "broadcast address"},
		{"star: multicast", any, "224.0.0.1:80", nil, "multicast address"},
		{"star: localhost", any, "localhost:80", nil, "loopback address"},
		{"no network", none, "example.org:443", nil, "has no network"},
		// The host's own public addresses are the host, as loopback is.
		{"star: own address", any, "93.184.216.99:443", nil, "93.184.216.99:443 is an address of this host"},
		{"star: own IPv6 address", any, "[2606:2800::99]:80", nil, "an address of this host"},
		{"star: own address, mapped", any, "[::ffff:93.184.216.99]:443", nil, "an address of this host"},
		{"star: own address, NAT64", any, "[64:ff9b::5db8:d863]:443", nil, "an address of this host"},
		{"star: name resolving to an own address", any, "own.example.net:443", nil, "own.example.net resolves to 93.184.216.99, an address of this host"},
		{"star: name resolving partly to an own address", any, "half-own.test:80", nil, "2606:2800::99, an address of this host"},
		{"star: another public address", any, "93.184.216.98:443", []string{"93.184.216.98"}, ""},
		{"own address listed exactly", ownListed, "93.184.216.99:443", []string{"93.184.216.99"}, ""},
		{"own IPv6 address listed exactly", ownListed, "[2606:2800::99]:80", []string{"2606:2800::99"}, ""},
		{"own address listed on another port", ownListed, "93.184.216.99:80", nil, "an address of this host"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target, err := parseAuthority(tt.target)
			require.NoError(t, err)
			addrs, _, err := tt.policy.decide(context.Background(), res, own, target)
			if tt.want == nil {
				var d *denial
				require.ErrorAs(t, err, &d, "allowed: %v", addrs)
				assert.Contains(t, d.reason, tt.reason)
				return
			}
			require.NoError(t, err)
			var got []string
			for _, a := range addrs {
				got = append(got, a.String())
			}
			assert.Equal(t, tt.want, got)
		})
	}

	t.Run("unresolvable name is an error, not a grant", func(t *testing.T) {
		q, _ := newEgressPolicy(true, []string{"gone.example.org"})
		_, _, err := q.decide(context.Background(), res, own, egressTarget{Host: "gone.example.org", Port: 443})
		require.Error(t, err)
		var d *denial
		assert.False(t, errors.As(err, &d))
	})

	t.Run("own addresses that cannot be listed are an error, not a grant", func(t *testing.T) {
		broken := func() ([]netip.Addr, error) { return nil, errors.New("netlink: no") }
		for _, target := range []egressTarget{{IP: netip.MustParseAddr("93.184.216.98"), Port: 443}, {Host: "pypi.org", Port: 443}} {
			addrs, _, err := any.decide(context.Background(), res, broken, target)
			require.Error(t, err, "allowed: %v", addrs)
			assert.Contains(t, err.Error(), "netlink: no")
		}
	})
}

// hostAddrs is a fixed list of the host's own addresses.
func hostAddrs(as ...string) func() ([]netip.Addr, error) {
	return func() ([]netip.Addr, error) {
		var out []netip.Addr
		for _, a := range as {
			out = append(out, netip.MustParseAddr(a))
		}
		return out, nil
	}
}

func TestEgressRuleParse(t *testing.T) {
	for _, bad := range []string{"*.127.0.0.1", "127.1", "exa mple.org", "*.*.org", "**", "*:443", ""} {
		_, err := parseEgressRule(bad)
		assert.Error(t, err, bad)
	}
	p, errs := newEgressPolicy(true, []string{"127.1", "example.org"})
	assert.Len(t, errs, 1, "a malformed entry is reported")
	assert.Len(t, p.rules, 1, "and grants nothing")
}

// FuzzParseAuthority: whatever the sandbox writes, a parsed target is a
// valid name or a standard literal, and never one a resolver would read as
// an address in another notation.
func FuzzParseAuthority(f *testing.F) {
	for _, s := range []string{"example.org:443", "127.0.0.2:8443", "[::1]:80", "127.1", "0x7f000001", "2130706433",
		"[::ffff:127.0.0.1]:443", "/run/clawpen/host.sock", "a.b.c.d:1", "0177.0.0.1", "[fe80::1%eth0]:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseAuthority(s)
		if err != nil {
			return
		}
		if got.IP.IsValid() == (got.Host != "") {
			t.Fatalf("%q: both or neither of name and address: %+v", s, got)
		}
		if got.IP.IsValid() {
			if got.IP.Zone() != "" {
				t.Fatalf("%q: zone accepted", s)
			}
			return
		}
		if _, err := netip.ParseAddr(got.Host); err == nil {
			t.Fatalf("%q: an address parsed as a name", s)
		}
		labels := strings.Split(got.Host, ".")
		if numericLabel(labels[len(labels)-1]) {
			t.Fatalf("%q: numeric name %q accepted", s, got.Host)
		}
		for _, c := range got.Host {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
				t.Fatalf("%q: name %q has %q", s, got.Host, c)
			}
		}
	})
}
