package e2e

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/test/harness"
)

// egressIP is where the loopback test servers listen: an address of the
// host's loopback, listed in the profile as that IP literal. Never any
// outside address.
const egressIP = "127.0.0.2"

// egressServers are the host-side destinations of the egress tests.
type egressServers struct {
	http, tls, raw string // listed
	unlisted       string // 127.0.0.3, not listed; must never be reached
	otherPort      string // 127.0.0.2, a port not listed; must never be reached
	caPEM          []byte
	reached        chan string // accepts on the two that must stay unreached
	rawGot         chan string // what the raw server read before it closed
}

func startEgressServers(t *testing.T) *egressServers {
	t.Helper()
	s := &egressServers{reached: make(chan string, 16), rawGot: make(chan string, 4)}
	caPEM, cert := harness.TestCA(t, egressIP)
	s.caPEM = caPEM
	mux := http.NewServeMux()
	mux.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "EGRESS-OK-%s", strings.ToUpper(map[bool]string{true: "tls", false: "http"}[r.TLS != nil]))
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		const size = 64 << 20
		w.Header().Set("Content-Length", fmt.Sprint(size))
		chunk := make([]byte, 256<<10)
		for n := 0; n < size; n += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	// A git repository served the "dumb" way (plain files): git clone
	// through the proxy like any https:// clone.
	repo := filepath.Join(t.TempDir(), "src")
	for _, args := range [][]string{
		{"init", "-q", "-b", "main", repo},
		{"-C", repo, "-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-q", "--allow-empty", "-m", "EGRESS-GIT-COMMIT"},
		{"clone", "-q", "--bare", repo, repo + ".git"},
		{"-C", repo + ".git", "update-server-info"},
	} {
		out, err := exec.Command("git", args...).CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
	}
	mux.Handle("/repo.git/", http.StripPrefix("/repo.git/", http.FileServer(http.Dir(repo+".git"))))
	listen := func(addr string) net.Listener {
		ln, err := net.Listen("tcp", addr)
		require.NoError(t, err, "listen on %s (Linux answers all of 127/8)", addr)
		t.Cleanup(func() { ln.Close() })
		return ln
	}
	serve := func(ln net.Listener, tlsConf *tls.Config) string {
		srv := &http.Server{Handler: mux, TLSConfig: tlsConf, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if tlsConf != nil {
				_ = srv.ServeTLS(ln, "", "")
			} else {
				_ = srv.Serve(ln)
			}
		}()
		t.Cleanup(func() { srv.Close() })
		return ln.Addr().String()
	}
	s.http = serve(listen(egressIP+":0"), nil)
	s.tls = serve(listen(egressIP+":0"), &tls.Config{Certificates: []tls.Certificate{cert}})
	raw := listen(egressIP + ":0")
	s.raw = raw.Addr().String()
	go func() {
		for {
			c, err := raw.Accept()
			if err != nil {
				return
			}
			// Reads one line, then ends the tunnel from the destination's side.
			b := make([]byte, 0, 64)
			one := make([]byte, 1)
			for len(b) < 64 {
				if _, err := c.Read(one); err != nil || one[0] == '\n' {
					break
				}
				b = append(b, one[0])
			}
			s.rawGot <- string(b)
			c.Close()
		}
	}()
	for _, a := range []string{"127.0.0.3:0", egressIP + ":0"} {
		ln := listen(a)
		if strings.HasPrefix(a, "127.0.0.3") {
			s.unlisted = ln.Addr().String()
		} else {
			s.otherPort = ln.Addr().String()
		}
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				s.reached <- ln.Addr().String()
				c.Close()
			}
		}()
	}
	return s
}

// setProfile assigns a group's profile in the host's database, as the
// owner's /profile command does.
func bashTool(cmd string, timeoutS int) string {
	b, _ := json.Marshal(map[string]any{"command": cmd, "timeout_s": timeoutS})
	return "TOOL bash " + string(b)
}

func portOf(addr string) string { _, p, _ := net.SplitHostPort(addr); return p }

// TestEgressThroughTheProxy: a group whose profile has network reaches the
// listed loopback servers through the host's proxy with curl and Python,
// over HTTP and TLS, and nothing else: every other destination and notation
// is refused, told to the tool, and audited; a download past the run's
// byte cap is cut; a group without network has no proxy at all.
func TestEgressThroughTheProxy(t *testing.T) {
	srv := startEgressServers(t)
	profiles := fmt.Sprintf(`{"profiles":{"web":{"network":"allowlist","egress":[%q,%q,%q,%q]}}}`,
		srv.http, srv.tls, srv.raw, "localhost:"+portOf(srv.http))
	h := harness.New(t, harness.Options{Owner: true, Profiles: profiles,
		Extra: map[string]string{"CLAWPEN_EGRESS_MB": "8"}})
	h.RegisterGroup(t, "family")
	h.CLI("groups", "profile", "family", "web")
	require.NoError(t, os.WriteFile(filepath.Join(h.Dir, "groups", "family", "ca.pem"), srv.caPEM, 0o644))

	curl := func(name, url string) string {
		return fmt.Sprintf(`echo %s=$(curl -sS --max-time 15 --cacert /workspace/group/ca.pem %s 2>&1 | head -c 300 | tr '\n' ' ')`, name, url)
	}
	py := func(name, url string) string {
		return fmt.Sprintf(`echo %s=$(python3 -c 'import ssl,sys,urllib.request as u; c=ssl.create_default_context(cafile="/workspace/group/ca.pem"); sys.stdout.write(u.urlopen(sys.argv[1], context=c, timeout=15).read().decode())' %s 2>&1 | tail -1)`, name, url)
	}
	// rawConnect sends one CONNECT line through bash's /dev/tcp and prints
	// the proxy's status line.
	rawConnect := func(name, target string) string {
		return fmt.Sprintf(`exec 3<>/dev/tcp/127.0.0.1/3128 && printf 'CONNECT %s HTTP/1.1\r\nHost: x\r\n\r\n' >&3 && echo %s=$(head -1 <&3 | tr -d '\r'); exec 3>&-`, target, name)
	}
	// rawGet sends one absolute-form request as written (curl rewrites
	// 127.1 and friends to 127.0.0.1 itself) and prints the status line.
	rawGet := func(name, hostport string) string {
		return fmt.Sprintf(`exec 3<>/dev/tcp/127.0.0.1/3128 && printf 'GET http://%s/hello HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n' >&3 && echo %s=$(tail -1 <&3); exec 3>&-`, hostport, hostport, name)
	}
	p := portOf(srv.http)
	cmds := []string{
		`echo PROXYENV=$HTTP_PROXY,$HTTPS_PROXY,$http_proxy,$https_proxy`,
		curl("CURL-HTTP", "http://"+srv.http+"/hello"),
		curl("CURL-TLS", "https://"+srv.tls+"/hello"),
		py("PY-HTTP", "http://"+srv.http+"/hello"),
		py("PY-TLS", "https://"+srv.tls+"/hello"),
		`echo REQ=$(python3 -c 'import requests' 2>/dev/null && python3 -c 'import sys,requests; sys.stdout.write(requests.get(sys.argv[1], verify="/workspace/group/ca.pem", timeout=15).text)' https://` + srv.tls + `/hello 2>&1 | tail -1 || echo no-requests-module)`,
		`echo GIT=$(git -c http.sslCAInfo=/workspace/group/ca.pem clone -q https://` + srv.tls + `/repo.git /tmp/repo 2>&1 | tail -1; git -C /tmp/repo log --format=%s 2>&1 | head -1)`,
		curl("UNLISTED-HOST", "http://"+srv.unlisted+"/hello"),
		curl("UNLISTED-PORT", "http://"+srv.otherPort+"/hello"),
		curl("LOCALHOST", "http://localhost:"+p+"/hello"),
		curl("SHORT-127", "http://127.1:"+p+"/hello"),
		curl("DECIMAL", "http://2130706433:"+p+"/hello"),
		curl("HEX", "http://0x7f000001:"+p+"/hello"),
		rawGet("RAW-SHORT-127", "127.1:"+p),
		rawGet("RAW-DECIMAL", "2130706433:"+p),
		rawGet("RAW-HEX", "0x7f000001:"+p),
		rawGet("RAW-OCTAL", "0177.0.0.2:"+p),
		curl("MAPPED", "http://[::ffff:127.0.0.2]:"+p+"/hello"),
		curl("V6-LOOPBACK", "http://[::1]:"+p+"/hello"),
		curl("METADATA", "http://169.254.169.254/latest/meta-data/"),
		curl("TLS-LOCALHOST", "https://localhost:"+portOf(srv.tls)+"/hello"),
		rawConnect("CONNECT-SOCKET", "/run/clawpen/host.sock"),
		rawConnect("CONNECT-UNIX", "unix:/run/clawpen/host.sock"),
		// A tunnel the destination ends; then a request for an unlisted
		// server and an IPC call, written on the same connection.
		// In a subshell: the write after the tunnel's end may meet a closed
		// socket (SIGPIPE), which is the refusal.
		`( exec 3<>/dev/tcp/127.0.0.1/3128 && printf 'CONNECT ` + srv.raw + ` HTTP/1.1\r\nHost: x\r\n\r\nfirst-line\n' >&3 && echo TUNNEL=$(head -1 <&3 | tr -d '\r') && sleep 1 && ` +
			`( printf 'GET http://` + srv.unlisted + `/ HTTP/1.1\r\nHost: x\r\n\r\nPOST /ipc/send_message HTTP/1.1\r\nHost: x\r\nContent-Length: 30\r\n\r\n{"text":"SMUGGLED-MESSAGE!!"}' >&3 ) 2>/dev/null; ` +
			`echo AFTER-TUNNEL=[$(timeout 5 cat <&3 | tr -d '\r\n' | head -c 200)] )`,
		"echo EGRESS-DONE",
	}
	h.Say(harness.GroupChat, "supergroup", "Family Chat", harness.MemberID, "@Andy\n"+bashTool(strings.Join(cmds, "; "), 120))
	got := h.Replies(harness.GroupChat, 1)[0]
	t.Log(got)
	assert.Contains(t, got, "EGRESS-DONE")
	// Python's requests where the sandbox has it (the host's /usr for
	// bwrap does; the agent image does not).
	if harness.Backend() == "bwrap" {
		assert.Contains(t, got, "REQ=EGRESS-OK-TLS")
	} else {
		assert.Regexp(t, `REQ=(EGRESS-OK-TLS|no-requests-module)`, got)
	}
	proxy := "http://127.0.0.1:3128"
	assert.Contains(t, got, "PROXYENV="+strings.Repeat(proxy+",", 3)+proxy)
	for _, want := range []string{"CURL-HTTP=EGRESS-OK-HTTP", "CURL-TLS=EGRESS-OK-TLS", "PY-HTTP=EGRESS-OK-HTTP", "PY-TLS=EGRESS-OK-TLS", "GIT=EGRESS-GIT-COMMIT", "TUNNEL=HTTP/1.1 200 Connection established", "AFTER-TUNNEL=[]"} {
		assert.Contains(t, got, want)
	}
	for name, reason := range map[string]string{
		"UNLISTED-HOST": "is not in this group's egress list", "UNLISTED-PORT": "is not in this group's egress list",
		"LOCALHOST": "a loopback address", "SHORT-127": "not in this group's egress list", "DECIMAL": "not in this group's egress list",
		"HEX": "not in this group's egress list", "RAW-SHORT-127": "non-standard notation", "RAW-DECIMAL": "non-standard notation",
		"RAW-HEX": "non-standard notation", "RAW-OCTAL": "non-standard notation", "MAPPED": "is not in this group's egress list", "V6-LOOPBACK": "is not in this group's egress list",
		"METADATA": "is not in this group's egress list",
	} {
		assert.Regexp(t, name+`=\{"error":"denied: [^"]*`+reason, got, name)
	}
	assert.Regexp(t, `TLS-LOCALHOST=curl: \(56\) CONNECT tunnel failed, response 403`, got)
	assert.Contains(t, got, "CONNECT-SOCKET=HTTP/1.1 403 denied: CONNECT wants host:port, not a path")
	assert.Contains(t, got, "CONNECT-UNIX=HTTP/1.1 403 denied: CONNECT wants host:port")
	assert.Equal(t, "first-line", <-srv.rawGot)
	for _, bad := range []string{"EGRESS-OK-HTTP\"", "SMUGGLED"} {
		assert.NotContains(t, got, bad)
	}

	// The byte cap: a 64 MiB download in a run capped at 8 MiB is cut.
	h.Say(harness.GroupChat, "supergroup", "Family Chat", harness.MemberID, "@Andy\n"+bashTool(
		`curl -sS --max-time 60 -o /tmp/big http://`+srv.http+`/big 2>&1 | head -c 200; echo; echo BIGSIZE=$(wc -c </tmp/big); echo BIG-DONE`, 90))
	got = h.Replies(harness.GroupChat, 2)[1]
	t.Log(got)
	require.Contains(t, got, "BIG-DONE")
	var size int64
	_, err := fmt.Sscanf(got[strings.Index(got, "BIGSIZE=")+len("BIGSIZE="):], "%d", &size)
	require.NoError(t, err)
	assert.Greater(t, size, int64(1<<20), "the download started")
	assert.LessOrEqual(t, size, int64(8<<20), "bytes past the cap reached the sandbox")

	// A group without network: nothing listens, no proxy variables.
	h.OwnerSays(fmt.Sprintf("/register %d plain Plain Chat", harness.GroupChat-1))
	h.WaitFor(harness.OwnerID, "groups/plain")
	h.Say(harness.GroupChat-1, "supergroup", "Plain Chat", harness.MemberID, "@Andy\n"+bashTool(
		`echo NOPROXYENV=[$HTTP_PROXY$HTTPS_PROXY$http_proxy$https_proxy]; curl -sS --max-time 5 -x http://127.0.0.1:3128 http://`+srv.http+`/hello 2>&1 | head -c 200; echo; echo PLAIN-DONE`, 30))
	got = h.Replies(harness.GroupChat-1, 1)[0]
	t.Log(got)
	assert.Contains(t, got, "NOPROXYENV=[]")
	assert.Contains(t, got, "curl: (7) Failed to connect to 127.0.0.1 port 3128", "nothing listens on the proxy port")
	assert.Contains(t, got, "PLAIN-DONE")
	assert.NotContains(t, got, "EGRESS-OK")

	select {
	case a := <-srv.reached:
		t.Errorf("the unlisted server %s was reached", a)
	default:
	}
	h.Stop()
	audit := h.AuditLog()
	t.Log(audit)
	for _, want := range []string{
		"family egress allow HTTP " + srv.http, "family egress allow CONNECT " + srv.tls, "family egress allow CONNECT " + srv.raw,
		"family egress deny HTTP " + srv.unlisted, "family egress deny HTTP " + srv.otherPort,
		"family egress deny HTTP localhost:" + p, "family egress deny HTTP 127.1:" + p, "family egress deny HTTP 2130706433:" + p,
		"family egress deny HTTP 0x7f000001:" + p, "family egress deny HTTP 0177.0.0.2:" + p, "family egress deny HTTP [::ffff:127.0.0.2]:" + p, "family egress deny HTTP [::1]:" + p,
		"family egress deny HTTP 169.254.169.254:80", "family egress deny CONNECT /run/clawpen/host.sock",
		"family egress deny CONNECT localhost:" + portOf(srv.tls), "egress byte cap of 8 MiB for this run reached",
	} {
		assert.Contains(t, audit, want)
	}
	assert.NotContains(t, audit, "plain egress")
}
