package agent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/clawpen/clawpen/internal/domain"
)

// The variables that point the agent at the host's TLS gateway instead of
// the host socket (cluster mode, DESIGN.md "Outgrowing one machine"). The
// CA certificate and the credential are files (a Swarm secret is one), so
// that the credential is in no process's environment.
const (
	GatewayURLEnv        = "CLAWPEN_GATEWAY_URL"             // https://host:port
	GatewayCAEnv         = "CLAWPEN_GATEWAY_CA_FILE"         // PEM: the only root the gateway is verified by
	GatewayCredentialEnv = "CLAWPEN_GATEWAY_CREDENTIAL_FILE" // the invocation's credential
)

// Gateway is where the host's TLS gateway is and how this invocation
// proves itself to it.
type Gateway struct {
	URL        string // https://host:port
	CACert     []byte // PEM
	Credential string
}

// GatewayFromEnv reads the gateway's variables: nil when CLAWPEN_GATEWAY_URL
// is unset (the host socket then), an error when it is set and the rest is
// missing or unreadable.
func GatewayFromEnv(getenv func(string) string) (*Gateway, error) {
	u := getenv(GatewayURLEnv)
	if u == "" {
		return nil, nil
	}
	read := func(env string) ([]byte, error) {
		path := getenv(env)
		if path == "" {
			return nil, fmt.Errorf("%s is set but %s is not", GatewayURLEnv, env)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", env, err)
		}
		return b, nil
	}
	ca, err := read(GatewayCAEnv)
	if err != nil {
		return nil, err
	}
	cred, err := read(GatewayCredentialEnv)
	if err != nil {
		return nil, err
	}
	return &Gateway{URL: u, CACert: ca, Credential: strings.TrimSpace(string(cred))}, nil
}

// GatewayClient is an HTTP client whose every connection goes to the
// gateway, over TLS verified by gw.CACert alone (never the system's roots),
// and whose every request carries the credential in its header. Requests
// name hostBaseURL as through the socket: the dialer decides where they go,
// so a request can never carry the credential anywhere else.
func GatewayClient(gw Gateway) (*http.Client, error) {
	dial, err := gatewayDialer(gw)
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: credentialTransport{cred: gw.Credential, rt: &http.Transport{
		// The request says http://clawpen: the transport speaks HTTP/1.1
		// over the connection this returns, which is TLS to the gateway.
		DialContext:       func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) },
		MaxIdleConns:      4,
		ForceAttemptHTTP2: false,
	}}}, nil
}

// gatewayDialer checks gw and returns what opens a TLS connection to it,
// verified by gw.CACert alone.
func gatewayDialer(gw Gateway) (func(context.Context) (net.Conn, error), error) {
	u, err := url.Parse(gw.URL)
	if err != nil {
		return nil, fmt.Errorf("gateway URL: %w", err)
	}
	if u.Scheme != "https" || u.Hostname() == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return nil, fmt.Errorf("gateway URL %q: want https://host[:port]", gw.URL)
	}
	if gw.Credential == "" {
		return nil, errors.New("gateway credential is empty")
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(gw.CACert) {
		return nil, errors.New("gateway CA: no PEM certificate")
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "443")
	}
	conf := &tls.Config{RootCAs: roots, ServerName: u.Hostname(), MinVersion: tls.VersionTLS13, NextProtos: []string{"http/1.1"}}
	dialer := &net.Dialer{}
	return func(ctx context.Context) (net.Conn, error) {
		raw, err := dialer.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		c := tls.Client(raw, conf)
		if err := c.HandshakeContext(ctx); err != nil {
			_ = raw.Close()
			return nil, fmt.Errorf("gateway TLS: %w", err)
		}
		return c, nil
	}, nil
}

// credentialTransport adds the credential to every request.
type credentialTransport struct {
	cred string
	rt   http.RoundTripper
}

func (t credentialTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(domain.GatewayCredentialHeader, t.cred)
	return t.rt.RoundTrip(r)
}
