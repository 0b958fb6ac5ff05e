package hostsock

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/clawpen/clawpen/internal/domain"
)

// runCA is one run's certificate authority for the hosts its profile holds
// credentials for (DESIGN.md, "Credentials for outside services"): made
// when the run's socket is, its key only in this process's memory, gone
// with the socket. X.509 name constraints limit it to exactly those hosts,
// so the sandbox, which trusts it, trusts it for nothing else; its leaves
// are signed when it is made, one per host.
type runCA struct {
	certPEM []byte
	leaves  map[string]*tls.Certificate // by credential host (name or address)
}

// caValidity is how long a run's CA and its leaves are valid: longer than
// the longest run a profile may have (24 h) plus the time a warm sandbox
// may wait for its job.
const caValidity = 48 * time.Hour

func newRunCA(creds []domain.Credential, now time.Time) (*runCA, error) {
	hosts := make([]string, len(creds))
	for i, c := range creds {
		hosts[i] = c.Host
	}
	ca, key, err := makeCA(hosts, now, caValidity)
	if err != nil {
		return nil, err
	}
	// One key for every leaf of the run: it never leaves the host either.
	// The CA's own key is dropped once they are signed.
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("run CA leaf key: %w", err)
	}
	r := &runCA{certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw}), leaves: map[string]*tls.Certificate{}}
	for _, c := range creds {
		if r.leaves[c.Host] != nil {
			continue
		}
		der, err := signLeaf(ca, key, leafKey, c.Host)
		if err != nil {
			return nil, fmt.Errorf("run CA leaf for %s: %w", c.Host, err)
		}
		r.leaves[c.Host] = &tls.Certificate{Certificate: [][]byte{der, ca.Raw}, PrivateKey: leafKey}
	}
	return r, nil
}

// NewServerIdentity makes a CA constrained to exactly hosts (names or
// addresses), as a run's CA is, and one server certificate for all of
// them, both valid for validity from now. It returns the CA's PEM
// certificate, for clients to trust, and the server's certificate with its
// key; the CA's key is dropped once the leaf is signed, so nothing else can
// ever be signed by it. The gateway (internal/gateway) serves with it.
func NewServerIdentity(hosts []string, now time.Time, validity time.Duration) ([]byte, *tls.Certificate, error) {
	if len(hosts) == 0 {
		return nil, nil, fmt.Errorf("server identity: no host names")
	}
	ca, key, err := makeCA(hosts, now, validity)
	if err != nil {
		return nil, nil, err
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("server key: %w", err)
	}
	der, err := signLeaf(ca, key, leafKey, hosts...)
	if err != nil {
		return nil, nil, fmt.Errorf("server certificate: %w", err)
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw})
	return caPEM, &tls.Certificate{Certificate: [][]byte{der, ca.Raw}, PrivateKey: leafKey}, nil
}

// makeCA makes a CA constrained to hosts, valid for validity from now.
func makeCA(hosts []string, now time.Time, validity time.Duration) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("run CA key: %w", err)
	}
	var names []string
	var ips []netip.Addr
	for _, h := range hosts {
		if a, err := netip.ParseAddr(h); err == nil {
			ips = append(ips, a)
		} else {
			names = append(names, h)
		}
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "clawpen run CA", Organization: []string{"clawpen"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(validity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	constrain(tmpl, names, ips)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, fmt.Errorf("run CA: %w", err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("run CA: %w", err)
	}
	return ca, key, nil
}

// signLeaf signs a server certificate for hosts (names or addresses),
// valid as long as ca.
func signLeaf(ca *x509.Certificate, caKey, leafKey *ecdsa.PrivateKey, hosts ...string) ([]byte, error) {
	lt := &x509.Certificate{
		SerialNumber: serial(),
		NotBefore:    ca.NotBefore,
		NotAfter:     ca.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, host := range hosts {
		if a, err := netip.ParseAddr(host); err == nil {
			// No common name for an address: OpenSSL holds a CN that looks
			// like a host name to the DNS constraints, which admit no address.
			lt.IPAddresses = append(lt.IPAddresses, a.AsSlice())
		} else {
			if lt.Subject.CommonName == "" {
				lt.Subject.CommonName = host
			}
			lt.DNSNames = append(lt.DNSNames, host)
		}
	}
	return x509.CreateCertificate(rand.Reader, lt, ca, leafKey.Public(), caKey)
}

// constrain limits a CA to exactly names and ips. A DNS constraint admits
// the name and every name under it, so each name's subdomains are
// excluded unless another credential host lies there; a kind of name with
// no host at all is closed (no IP addresses, DNS names only under
// ".invalid", which never resolves); URIs and mail addresses likewise.
func constrain(t *x509.Certificate, names []string, ips []netip.Addr) {
	t.PermittedDNSDomainsCritical = true
	t.PermittedDNSDomains = names
	for _, n := range names {
		under := false
		for _, m := range names {
			under = under || strings.HasSuffix(m, "."+n)
		}
		if !under {
			t.ExcludedDNSDomains = append(t.ExcludedDNSDomains, "."+n)
		}
	}
	if len(names) == 0 {
		t.PermittedDNSDomains = []string{"invalid"}
	}
	for _, a := range ips {
		t.PermittedIPRanges = append(t.PermittedIPRanges, &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(a.BitLen(), a.BitLen())})
	}
	if len(ips) == 0 {
		t.ExcludedIPRanges = []*net.IPNet{{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}, {IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}}
	}
	t.PermittedURIDomains = []string{"invalid"}
	t.PermittedEmailAddresses = []string{"invalid"}
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		// crypto/rand does not fail on Linux (Go 1.24 and later panic
		// rather than return an error); a fixed serial would still verify.
		return big.NewInt(1)
	}
	return n
}
