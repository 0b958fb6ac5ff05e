package runner

import (
	"maps"

	"github.com/clawpen/clawpen/internal/domain"
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
