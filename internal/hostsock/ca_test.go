package hostsock

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
)

// The run's CA is trusted, by Go's verifier, for exactly the credential
// hosts: a leaf it signs for any other name or address is refused as a
// name the CA may not vouch for, also a subdomain, the name with a
// trailing dot, the other kind of name when the profile has none of it.
func TestRunCAIsConstrainedToTheCredentialHosts(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		name      string
		creds     []domain.Credential
		good, bad []string
	}{
		{"names", []domain.Credential{{Host: "api.github.com", Port: 443}, {Host: "search.example.org", Port: 8443}},
			[]string{"api.github.com", "search.example.org"},
			[]string{"evil.com", "x.api.github.com", "github.com", "example.org", "api.github.com.evil.com", "127.0.0.1", "::1"}},
		{"addresses", []domain.Credential{{Host: "127.0.0.2", Port: 8443}, {Host: "::1", Port: 9443}},
			[]string{"127.0.0.2", "::1"},
			[]string{"127.0.0.3", "::2", "localhost", "api.github.com"}},
		{"a host under another", []domain.Credential{{Host: "example.org", Port: 443}, {Host: "api.example.org", Port: 443}},
			[]string{"example.org", "api.example.org"},
			[]string{"example.com", "127.0.0.1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hosts []string
			for _, c := range tc.creds {
				hosts = append(hosts, c.Host)
			}
			ca, caKey, err := makeCA(hosts, now, caValidity)
			require.NoError(t, err)
			roots := x509.NewCertPool()
			roots.AddCert(ca)
			leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			require.NoError(t, err)
			verify := func(host string) error {
				der, err := signLeaf(ca, caKey, leafKey, host)
				require.NoError(t, err)
				leaf, err := x509.ParseCertificate(der)
				require.NoError(t, err)
				_, err = leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: host, CurrentTime: now})
				return err
			}
			for _, h := range tc.good {
				assert.NoError(t, verify(h), h)
			}
			for _, h := range tc.bad {
				err := verify(h)
				var inv x509.CertificateInvalidError
				require.True(t, errors.As(err, &inv), "%s: %v", h, err)
				assert.Equal(t, x509.CANotAuthorizedForThisName, inv.Reason, h)
			}
		})
	}
}

// The leaves are made with the CA and signed once: the host keeps no CA key.
func TestRunCALeaves(t *testing.T) {
	r, err := newRunCA([]domain.Credential{{Host: "127.0.0.2", Port: 8443, Header: "A"}, {Host: "127.0.0.2", Port: 8443, Header: "B"}, {Host: "api.github.com", Port: 443}}, time.Now())
	require.NoError(t, err)
	assert.Len(t, r.leaves, 2)
	assert.Contains(t, string(r.certPEM), "BEGIN CERTIFICATE")
	leaf, err := x509.ParseCertificate(r.leaves["api.github.com"].Certificate[0])
	require.NoError(t, err)
	assert.Equal(t, []string{"api.github.com"}, leaf.DNSNames)
	assert.LessOrEqual(t, time.Until(leaf.NotAfter), caValidity)
}
