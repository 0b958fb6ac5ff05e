package runner

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/hostsock"
)

// egressEnv is the sandbox's environment for profile p: with network, the
// proxy variables every ordinary tool reads (curl, git, pip, Python, Go's
// net/http) point at the agent's relay; without, env unchanged. No real
// interface is ever given: the proxy is the only way out.
func egressEnv(env map[string]string, p domain.Profile) map[string]string {
	if !p.HasNetwork() {
		return env
	}
	out := maps.Clone(env)
	if out == nil {
		out = map[string]string{}
	}
	proxy := "http://" + domain.EgressProxyAddr
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
		out[k] = proxy
	}
	return out
}

// caBundleName is the file, in the run's socket directory (removed with
// the run), holding the roots a sandbox with credentials trusts.
const caBundleName = "ca-certificates.crt"

// caBundle writes the bundle of srv's run CA and the host's system roots
// beside its socket and answers its host path; "" when the run has no
// credentials (the sandbox keeps its own roots).
func (r *Runner) caBundle(srv *hostsock.Server) (string, error) {
	ca := srv.RunCA()
	if ca == nil {
		return "", nil
	}
	if len(r.cfg.SystemRoots) == 0 {
		r.cfg.Logger.Warn("no system roots found for the sandbox's CA bundle: it trusts its run's CA only")
	}
	data := append(append(append([]byte(nil), r.cfg.SystemRoots...), '\n'), ca...)
	path := filepath.Join(filepath.Dir(srv.Path()), caBundleName)
	// Read-only for everyone: the sandbox user reads it through its bind.
	if err := os.WriteFile(path, data, 0o444); err != nil {
		return "", fmt.Errorf("write the CA bundle: %w", err)
	}
	return path, nil
}

// caEnv points the variables TLS clients read their roots from (OpenSSL
// and Go, Python's requests, curl, Node, git) at the bundle, when there
// is one.
func caEnv(env map[string]string, bundle string) map[string]string {
	if bundle == "" {
		return env
	}
	out := maps.Clone(env)
	if out == nil {
		out = map[string]string{}
	}
	for _, k := range []string{"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "GIT_SSL_CAINFO"} {
		out[k] = domain.CABundlePath
	}
	return out
}
