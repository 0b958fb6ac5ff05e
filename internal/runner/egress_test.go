package runner

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/clawpen/clawpen/internal/domain"
)

func TestEgressEnv(t *testing.T) {
	base := map[string]string{"TZ": "UTC"}
	none := egressEnv(base, domain.Profile{Network: domain.NetworkNone})
	assert.Equal(t, map[string]string{"TZ": "UTC"}, none, "no network: no proxy variables")

	with := egressEnv(base, domain.Profile{Network: domain.NetworkAllowlist, Egress: []string{"example.org"}})
	assert.Equal(t, map[string]string{
		"TZ": "UTC", "HTTP_PROXY": "http://127.0.0.1:3128", "HTTPS_PROXY": "http://127.0.0.1:3128",
		"http_proxy": "http://127.0.0.1:3128", "https_proxy": "http://127.0.0.1:3128",
	}, with)
	assert.Equal(t, map[string]string{"TZ": "UTC"}, base, "the shared environment is not changed")
}

func TestCAEnv(t *testing.T) {
	base := map[string]string{"TZ": "UTC"}
	assert.Equal(t, base, caEnv(base, ""), "no credentials: the sandbox keeps its own roots")
	with := caEnv(base, "/host/run/ca-certificates.crt")
	for _, k := range []string{"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "GIT_SSL_CAINFO"} {
		assert.Equal(t, domain.CABundlePath, with[k], k)
	}
	assert.Equal(t, map[string]string{"TZ": "UTC"}, base, "the shared environment is not changed")
}
