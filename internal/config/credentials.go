package config

import (
	"fmt"
	"net"
	"net/netip"
	"net/textproto"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/clawpen/clawpen/internal/domain"
)

// Headers a credential may not set: they frame or route the request, or
// belong to one connection, and the proxy sets them itself.
var reservedHeaders = map[string]bool{
	"Host": true, "Content-Length": true, "Transfer-Encoding": true, "Connection": true, "Keep-Alive": true,
	"Te": true, "Trailer": true, "Upgrade": true, "Expect": true,
}

// parseCredentials reads a profile's "credentials": [{"host", "header",
// "value"}], each value naming the host's variables as ${NAME}.
func parseCredentials(raw jsontext.Value, p *domain.Profile) error {
	var list []struct {
		Host   string `json:"host"`
		Header string `json:"header"`
		Value  string `json:"value"`
	}
	if err := json.Unmarshal(raw, &list, json.RejectUnknownMembers(true)); err != nil {
		return err
	}
	if len(list) > maxCredentials {
		return fmt.Errorf("more than %d entries", maxCredentials)
	}
	seen := map[string]bool{}
	for _, e := range list {
		host, port, err := credentialHost(e.Host)
		if err != nil {
			return err
		}
		c := domain.Credential{Host: host, Port: port, Header: textproto.CanonicalMIMEHeaderKey(e.Header), Value: e.Value}
		if e.Header == "" || strings.IndexFunc(e.Header, func(r rune) bool { return !tokenChar(r) }) >= 0 {
			return fmt.Errorf("%s: header %q: want a header name", c.Authority(), e.Header)
		}
		if reservedHeaders[c.Header] || strings.HasPrefix(c.Header, "Proxy-") {
			return fmt.Errorf("%s: header %s frames or routes the request; a credential cannot set it", c.Authority(), c.Header)
		}
		if err := domain.ParseTemplate(e.Value); err != nil {
			return fmt.Errorf("%s: value: %w", c.Authority(), err)
		}
		if k := c.Authority() + " " + c.Header; seen[k] {
			return fmt.Errorf("%s: header %s given twice", c.Authority(), c.Header)
		} else {
			seen[k] = true
		}
		p.Credentials = append(p.Credentials, c)
	}
	return nil
}

// credentialHost reads host[:port] (port 443 when left out): a lower-case
// host name without a wildcard or trailing dot, or an IP address (IPv6 in
// brackets).
func credentialHost(s string) (string, uint16, error) {
	host, port := s, "443"
	if h, p, err := net.SplitHostPort(s); err == nil {
		host, port = h, p
	} else if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		host = s[1 : len(s)-1]
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 {
		return "", 0, fmt.Errorf("host %q: port %q: want 1 to 65535", s, port)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" || a.Is4In6() {
			return "", 0, fmt.Errorf("host %q: want a plain IPv4 or IPv6 address", s)
		}
		if a.Is6() && !strings.HasPrefix(s, "[") {
			return "", 0, fmt.Errorf("host %q: write an IPv6 address in brackets", s)
		}
		return a.String(), uint16(n), nil
	}
	if strings.HasPrefix(host, "*") || host == "" {
		return "", 0, fmt.Errorf("host %q: want one host name, no wildcard", s)
	}
	if err := ValidEgress(host); err != nil {
		return "", 0, err
	}
	return host, uint16(n), nil
}

// tokenChar: RFC 9110's tchar.
func tokenChar(r rune) bool {
	return r < 0x7f && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", r))
}

// egressAllows reports whether an egress list lets a sandbox reach
// host:port, as the egress proxy matches it: "*" any host name, "*.x"
// names under x, a name that name, an address that address; the port as
// given, or 80 and 443.
func egressAllows(entries []string, host string, port uint16) bool {
	ip, ipErr := netip.ParseAddr(host)
	for _, e := range entries {
		h, p := e, ""
		if eh, ep, err := net.SplitHostPort(e); err == nil {
			h, p = eh, ep
		}
		if p == "" && port != 80 && port != 443 || p != "" && p != strconv.Itoa(int(port)) {
			continue
		}
		if a, err := netip.ParseAddr(h); err == nil {
			if ipErr == nil && a == ip {
				return true
			}
			continue
		}
		switch {
		case ipErr == nil:
		case h == "*", h == host, strings.HasPrefix(h, "*.") && strings.HasSuffix(host, h[1:]):
			return true
		}
	}
	return false
}
