package app

import (
	"crypto/x509"
	"fmt"
	"os"
	"strings"

	"github.com/clawpen/clawpen/internal/config"
	"github.com/clawpen/clawpen/internal/leakguard"
	"github.com/clawpen/clawpen/internal/tools"
)

// Guard is the leak guard of a host configured as cfg: its secrets are the
// model and transcription keys, the bot token, the variables the profiles' credentials name
// and the env of the bridge tools in td, read now and again at each
// Refresh (each run, each bridge tool call), since the profiles and tool
// files change while the host runs.
func Guard(cfg config.Config, td *tools.Dir) *leakguard.Guard {
	return leakguard.NewFrom(func() []leakguard.Secret {
		out := []leakguard.Secret{
			{Name: "TELEGRAM_BOT_TOKEN", Value: cfg.TelegramToken},
			{Name: "ANTHROPIC_API_KEY", Value: cfg.AnthropicKey},
			{Name: "OPENAI_API_KEY", Value: cfg.OpenAIKey},
			{Name: "CLAWPEN_TRANSCRIBE_KEY", Value: cfg.TranscribeKey},
		}
		profiles := config.ReadProfiles(cfg.Profiles)
		for _, name := range profiles.Names() {
			p, _ := profiles.Get(name)
			for _, c := range p.Credentials {
				for _, v := range c.Vars() {
					out = append(out, leakguard.Secret{Name: v, Value: cfg.HostEnv(v)})
				}
			}
		}
		if td != nil {
			for _, t := range td.Load().Tools {
				for _, v := range t.Env {
					out = append(out, leakguard.Secret{Name: v, Value: cfg.HostEnv(v)})
				}
			}
		}
		return out
	})
}

// UpstreamRoots are the roots the host verifies a credential host against:
// the system's, and the certificates in CLAWPEN_UPSTREAM_CA_FILE. A file
// that cannot be read or holds no certificate is an error: the host does
// not start rather than inject credentials it cannot check the way to.
// Without a file they are nil, which crypto/tls reads as the system's:
// loaded on the first verification, not on serve's start path (parsing
// every system root took ~10 ms before the first getUpdates).
func UpstreamRoots(cfg config.Config) (*x509.CertPool, error) {
	if cfg.UpstreamCAFile == "" {
		return nil, nil
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	data, err := os.ReadFile(cfg.UpstreamCAFile)
	if err != nil {
		return nil, fmt.Errorf("CLAWPEN_UPSTREAM_CA_FILE: %w", err)
	}
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("CLAWPEN_UPSTREAM_CA_FILE=%s holds no PEM certificate", cfg.UpstreamCAFile)
	}
	return pool, nil
}

// systemRootFiles are where Linux distributions keep their roots as one
// PEM file (crypto/x509's list).
var systemRootFiles = []string{
	"/etc/ssl/certs/ca-certificates.crt",                // Debian, Ubuntu, Gentoo, Arch
	"/etc/pki/tls/certs/ca-bundle.crt",                  // Fedora, RHEL 6
	"/etc/ssl/ca-bundle.pem",                            // openSUSE
	"/etc/pki/tls/cacert.pem",                           // OpenELEC
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", // CentOS, RHEL 7
	"/etc/ssl/cert.pem",                                 // Alpine
}

// SystemRootsPEM is the host's system roots as PEM (SSL_CERT_FILE, or the
// first bundle file found), for the bundle a sandbox with credentials
// trusts beside its run's CA; nil when there is none.
func SystemRootsPEM() []byte {
	files := systemRootFiles
	if f := os.Getenv("SSL_CERT_FILE"); f != "" {
		files = []string{f}
	}
	for _, f := range files {
		if data, err := os.ReadFile(f); err == nil && len(data) > 0 {
			return data
		}
	}
	return nil
}

// credentialsFinding checks what credential injection needs: roots to
// verify upstreams with, and the variables the profiles' credentials name
// (a request to a host whose variable is unset is refused). Absent when no
// profile holds a credential and no CA file is set.
func credentialsFinding(cfg config.Config) (Finding, bool) {
	f := Finding{Name: "credentials"}
	now := config.ReadProfiles(cfg.Profiles)
	n := 0
	var unset []string
	for _, name := range now.Names() {
		p, _ := now.Get(name)
		for _, c := range p.Credentials {
			n++
			if _, err := c.Expand(cfg.HostEnv); err != nil {
				unset = append(unset, fmt.Sprintf("profile %s, %s for %s: %v", name, c.Header, c.Authority(), err))
			}
		}
	}
	if n == 0 && cfg.UpstreamCAFile == "" {
		return f, false
	}
	roots := "the system's"
	if cfg.UpstreamCAFile != "" {
		roots += " and " + cfg.UpstreamCAFile
	}
	switch _, err := UpstreamRoots(cfg); {
	case err != nil:
		f.Verdict, f.Detail = Fail, err.Error()+"; the host does not start"
		f.Fix = "point CLAWPEN_UPSTREAM_CA_FILE at a PEM file of CA certificates, or unset it"
	case len(unset) > 0:
		f.Verdict, f.Detail = Warn, "requests to these hosts are refused: "+strings.Join(unset, "; ")
		f.Fix = "set the variables in the host's environment or .env, then restart"
	default:
		f.Verdict, f.Detail = OK, fmt.Sprintf("%d credentials in the profiles, their variables set; upstreams verified against %s roots", n, roots)
	}
	return f, true
}
