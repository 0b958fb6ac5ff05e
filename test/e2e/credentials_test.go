package e2e

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/test/harness"
)

// credSecret is the credential the host holds (E2E_CRED_TOKEN) and injects;
// the sandbox must never see it.
const credSecret = "ghp_E2E-CREDENTIAL-never-in-sandbox-42"

// credUpstream is a loopback HTTPS server (a certificate of the test CA,
// for egressIP) that records the Authorization values of every request and
// answers how many it got and whether they were the credential, never the
// values themselves; it serves a git repository too.
type credUpstream struct {
	addr string
	mu   sync.Mutex
	auth map[string][][]string // path -> the Authorization values of each request
}

func (u *credUpstream) seen(prefix string) [][]string {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out [][]string
	for p, v := range u.auth {
		if strings.HasPrefix(p, prefix) {
			out = append(out, v...)
		}
	}
	return out
}

func startCredUpstream(t *testing.T, cert tls.Certificate) *credUpstream {
	t.Helper()
	u := &credUpstream{auth: map[string][][]string{}}
	repo := filepath.Join(t.TempDir(), "src")
	for _, args := range [][]string{
		{"init", "-q", "-b", "main", repo},
		{"-C", repo, "-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-q", "--allow-empty", "-m", "CRED-GIT-COMMIT"},
		{"clone", "-q", "--bare", repo, repo + ".git"},
		{"-C", repo + ".git", "update-server-info"},
	} {
		out, err := exec.Command("git", args...).CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
	}
	files := http.StripPrefix("/repo.git/", http.FileServer(http.Dir(repo+".git")))
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		vals := r.Header.Values("Authorization")
		u.mu.Lock()
		u.auth[r.URL.Path] = append(u.auth[r.URL.Path], vals)
		u.mu.Unlock()
		if strings.HasPrefix(r.URL.Path, "/repo.git/") {
			files.ServeHTTP(w, r)
			return
		}
		ok := len(vals) == 1 && vals[0] == "Bearer "+credSecret
		fmt.Fprintf(w, "AUTH-%d-%v", len(vals), ok)
	})
	ln, err := net.Listen("tcp", egressIP+":0")
	require.NoError(t, err)
	srv := &http.Server{Handler: h, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { srv.Close() })
	u.addr = ln.Addr().String()
	return u
}

// TestCredentialInjection: a group whose profile holds a credential for a
// host reaches it with curl, Python's urllib and git clone, each request
// carrying the credential once (the sandbox's own header of that name
// replaced), trusting the run's CA through the variables the host sets;
// the sandbox never sees the value (not in its environment, its files,
// /proc, nor its own trace of what it sent); another host is still an
// end-to-end tunnel showing its own certificate; each injected request is
// audited without the value.
func TestCredentialInjection(t *testing.T) {
	caPEM, cert := harness.TestCA(t, egressIP)
	cred := startCredUpstream(t, cert)
	plain := startCredUpstream(t, cert)
	caFile := filepath.Join(t.TempDir(), "upstream-ca.pem")
	require.NoError(t, os.WriteFile(caFile, caPEM, 0o644))
	profiles := fmt.Sprintf(`{"profiles":{"cred":{"network":"allowlist","egress":[%q,%q],
		"credentials":[{"host":%q,"header":"Authorization","value":"Bearer ${E2E_CRED_TOKEN}"}]}}}`, cred.addr, plain.addr, cred.addr)
	h := harness.New(t, harness.Options{Owner: true, Profiles: profiles,
		Extra: map[string]string{"CLAWPEN_UPSTREAM_CA_FILE": caFile, "E2E_CRED_TOKEN": credSecret}})
	h.RegisterGroup(t, "family")
	h.CLI("groups", "profile", "family", "cred")
	groupDir := filepath.Join(h.Dir, "groups", "family")
	require.NoError(t, os.WriteFile(filepath.Join(groupDir, "testca.pem"), caPEM, 0o644))

	c, p := "https://"+cred.addr, "https://"+plain.addr
	cmds := []string{
		`echo CAENV=$SSL_CERT_FILE,$REQUESTS_CA_BUNDLE,$CURL_CA_BUNDLE,$NODE_EXTRA_CA_CERTS,$GIT_SSL_CAINFO`,
		`echo CURL=$(curl -sS --max-time 15 -H 'Authorization: Bearer sandbox-own-value' --trace-ascii /workspace/group/curl-trace.txt ` + c + `/hello 2>&1 | head -c 300)`,
		`echo CURL-ISSUER=$(curl -sv --max-time 15 -o /dev/null ` + c + `/hello 2>&1 | grep -o 'issuer: .*' | head -1)`,
		`echo PY=$(python3 -c 'import sys,urllib.request as u; r=u.Request(sys.argv[1], headers={"Authorization": "token sandbox-own"}); sys.stdout.write(u.urlopen(r, timeout=15).read().decode())' ` + c + `/hello 2>&1 | tail -1)`,
		`echo GIT=$(git clone -q ` + c + `/repo.git /tmp/repo 2>&1 | tail -1; git -C /tmp/repo log --format=%s 2>&1 | head -1)`,
		`echo TUNNEL=$(curl -sS --max-time 15 --cacert /workspace/group/testca.pem ` + p + `/hello 2>&1 | head -c 300)`,
		`echo TUNNEL-ISSUER=$(curl -sv --max-time 15 -o /dev/null --cacert /workspace/group/testca.pem ` + p + `/hello 2>&1 | grep -o 'issuer: [^;]*' | head -1)`,
		`echo TUNNEL-RUNCA=$(curl -sS --max-time 15 -o /dev/null ` + p + `/hello 2>&1 | head -c 200)`,
		// Everything the sandbox can read of itself, for the host to search.
		`{ env; cat /proc/self/environ; for d in /proc/[0-9]*; do cat $d/environ $d/cmdline 2>/dev/null; done; cat /run/clawpen/ca-certificates.crt; ls -la /run/clawpen; } > /workspace/group/seen.txt 2>&1`,
		`echo CRED-DONE`,
	}
	h.Say(harness.GroupChat, "supergroup", "Family Chat", harness.MemberID, "@Andy\n"+bashTool(strings.Join(cmds, "; "), 150))
	got := h.Replies(harness.GroupChat, 1)[0]
	t.Log(got)
	require.Contains(t, got, "CRED-DONE")
	bundle := "/run/clawpen/ca-certificates.crt"
	assert.Contains(t, got, "CAENV="+strings.Repeat(bundle+",", 4)+bundle)
	assert.Contains(t, got, "CURL=AUTH-1-true", "curl's own Authorization replaced, not doubled")
	assert.Contains(t, got, "CURL-ISSUER=issuer: O=clawpen; CN=clawpen run CA", "the sandbox sees the run's CA for the credential host")
	assert.Contains(t, got, "PY=AUTH-1-true")
	assert.Contains(t, got, "GIT=CRED-GIT-COMMIT")
	assert.Contains(t, got, "TUNNEL=AUTH-0-false", "no credential for another host")
	assert.Contains(t, got, "TUNNEL-ISSUER=issuer: CN=clawpen egress test CA", "the tunnel shows the upstream's own certificate")
	assert.Contains(t, got, "TUNNEL-RUNCA=curl: (60)", "the sandbox's bundle does not vouch for the tunnel's upstream")
	assert.NotContains(t, got, credSecret)

	gitReqs := cred.seen("/repo.git/")
	require.NotEmpty(t, gitReqs)
	for _, v := range append(gitReqs, cred.seen("/hello")...) {
		assert.Equal(t, []string{"Bearer " + credSecret}, v)
	}
	for _, v := range plain.seen("/") {
		assert.Empty(t, v)
	}

	// The sandbox never held the value: not in anything it could read of
	// itself, nor in its own trace of what it sent and got.
	trace, err := os.ReadFile(filepath.Join(groupDir, "curl-trace.txt"))
	require.NoError(t, err)
	assert.Contains(t, strings.ToLower(string(trace)), "authorization: bearer sandbox-own-value", "the trace is of what the sandbox sent")
	seen, err := os.ReadFile(filepath.Join(groupDir, "seen.txt"))
	require.NoError(t, err)
	assert.Contains(t, string(seen), "BEGIN CERTIFICATE")
	require.NoError(t, filepath.Walk(h.Dir, func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() || !info.Mode().IsRegular() || strings.HasSuffix(path, ".db") || strings.Contains(path, ".db-") {
			return nil
		}
		b, rerr := os.ReadFile(path)
		if rerr == nil {
			assert.NotContains(t, string(b), credSecret, path)
		}
		return nil
	}))

	h.Stop()
	audit := h.AuditLog()
	t.Log(audit)
	assert.NotContains(t, audit, credSecret)
	for _, want := range []string{
		"family egress allow GET https://" + cred.addr + "/hello: credential [Authorization] injected, answered 200",
		"family egress allow GET https://" + cred.addr + "/repo.git/info/refs: credential [Authorization] injected, answered 200",
		"family egress allow CONNECT " + plain.addr,
	} {
		assert.Contains(t, audit, want)
	}
}
