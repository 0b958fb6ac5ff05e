package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
)

func TestParseProfiles(t *testing.T) {
	tests := []struct {
		name, file string
		want       map[string]domain.Profile
		errHas     string // "" = valid
	}{
		{name: "example", file: `{"profiles":{"research":{"network":"allowlist","egress":["en.wikipedia.org","*.github.com:443","127.0.0.2:8443","[::1]:80","*"],
			"memory_mb":1024,"pids":256,"cpus":1.5,"timeout":"15m","disk_mb":2048,"tools":["web_search"],"daily_tokens":500000}}}`,
			want: map[string]domain.Profile{"research": {Name: "research", Network: "allowlist",
				Egress:   []string{"en.wikipedia.org", "*.github.com:443", "127.0.0.2:8443", "[::1]:80", "*"},
				MemoryMB: 1024, Pids: 256, CPUs: 1.5, Timeout: 15 * time.Minute, DiskMB: 2048, Tools: []string{"web_search"}, DailyTokens: 500000}}},
		{name: "empty profile is no network", file: `{"profiles":{"x":{}}}`, want: map[string]domain.Profile{"x": {Name: "x", Network: "none"}}},
		{name: "no profiles object", file: `{}`, errHas: `no "profiles"`},
		{name: "unknown top field", file: `{"profiles":{},"x":1}`, errHas: "not a profiles file"},
		{name: "trailing garbage", file: `{"profiles":{}} x`, errHas: "not a profiles file"},
		{name: "duplicate profile", file: `{"profiles":{"a":{},"a":{}}}`, errHas: "not a profiles file"},
		{name: "redefines default", file: `{"profiles":{"default":{"network":"allowlist"}}}`, errHas: `profile "default": built in`},
		{name: "bad name", file: `{"profiles":{"Bad Name":{}}}`, errHas: `profile "Bad Name"`},
		{name: "unknown field", file: `{"profiles":{"a":{"netwrk":"none"}}}`, errHas: `profile "a": field "netwrk": unknown field`},
		{name: "bad network", file: `{"profiles":{"a":{"network":"open"}}}`, errHas: `profile "a": field "network": "open"`},
		{name: "egress without network", file: `{"profiles":{"a":{"egress":["x.org"]}}}`, errHas: `field "egress": given, but`},
		{name: "egress bad port", file: `{"profiles":{"a":{"network":"allowlist","egress":["x.org:99999"]}}}`, errHas: `field "egress": egress "x.org:99999"`},
		{name: "egress url", file: `{"profiles":{"a":{"network":"allowlist","egress":["https://x.org/"]}}}`, errHas: `field "egress"`},
		{name: "egress upper case", file: `{"profiles":{"a":{"network":"allowlist","egress":["X.org"]}}}`, errHas: "lower case"},
		{name: "egress single label", file: `{"profiles":{"a":{"network":"allowlist","egress":["intranet"]}}}`, errHas: "full host name"},
		{name: "memory too small", file: `{"profiles":{"a":{"memory_mb":1}}}`, errHas: `field "memory_mb": 1: want 64`},
		{name: "memory fractional", file: `{"profiles":{"a":{"memory_mb":1.5}}}`, errHas: `field "memory_mb": 1.5: want a whole number`},
		{name: "memory string", file: `{"profiles":{"a":{"memory_mb":"1G"}}}`, errHas: `field "memory_mb"`},
		{name: "pids zero", file: `{"profiles":{"a":{"pids":0}}}`, errHas: `field "pids"`},
		{name: "cpus zero", file: `{"profiles":{"a":{"cpus":0}}}`, errHas: `field "cpus"`},
		{name: "timeout number", file: `{"profiles":{"a":{"timeout":600}}}`, errHas: `field "timeout"`},
		{name: "timeout huge", file: `{"profiles":{"a":{"timeout":"100h"}}}`, errHas: `field "timeout": "100h"`},
		{name: "tool name", file: `{"profiles":{"a":{"tools":["rm -rf"]}}}`, errHas: `field "tools"`},
		{name: "credentials", file: `{"profiles":{"a":{"network":"allowlist","egress":["*.github.com:443","127.0.0.2:8443","[::1]:9443"],"credentials":[
			{"host":"api.github.com","header":"authorization","value":"Bearer ${GITHUB_TOKEN}"},
			{"host":"127.0.0.2:8443","header":"X-Api-Key","value":"${A}-${B_2}"},
			{"host":"[::1]:9443","header":"X-Key","value":"${A}"}]}}}`,
			want: map[string]domain.Profile{"a": {Name: "a", Network: "allowlist", Egress: []string{"*.github.com:443", "127.0.0.2:8443", "[::1]:9443"},
				Credentials: []domain.Credential{
					{Host: "api.github.com", Port: 443, Header: "Authorization", Value: "Bearer ${GITHUB_TOKEN}"},
					{Host: "127.0.0.2", Port: 8443, Header: "X-Api-Key", Value: "${A}-${B_2}"},
					{Host: "::1", Port: 9443, Header: "X-Key", Value: "${A}"}}}}},
		{name: "credential host not in egress", file: `{"profiles":{"a":{"network":"allowlist","egress":["github.com"],"credentials":[{"host":"api.github.com","header":"X","value":"${T}"}]}}}`,
			errHas: `api.github.com:443 is not allowed by "egress"`},
		{name: "credential port not in egress", file: `{"profiles":{"a":{"network":"allowlist","egress":["127.0.0.2:8443"],"credentials":[{"host":"127.0.0.2","header":"X","value":"${T}"}]}}}`,
			errHas: `127.0.0.2:443 is not allowed`},
		{name: "credential without network", file: `{"profiles":{"a":{"credentials":[{"host":"x.org","header":"X","value":"${T}"}]}}}`, errHas: `x.org:443 is not allowed`},
		{name: "credential literal secret", file: `{"profiles":{"a":{"network":"allowlist","egress":["x.org"],"credentials":[{"host":"x.org","header":"X","value":"Bearer abc"}]}}}`,
			errHas: "names no variable"},
		{name: "credential bad variable", file: `{"profiles":{"a":{"network":"allowlist","egress":["x.org"],"credentials":[{"host":"x.org","header":"X","value":"$T"}]}}}`,
			errHas: "${NAME}"},
		{name: "credential newline", file: `{"profiles":{"a":{"network":"allowlist","egress":["x.org"],"credentials":[{"host":"x.org","header":"X","value":"${T}\r\nX: y"}]}}}`,
			errHas: "printable ASCII"},
		{name: "credential host header", file: `{"profiles":{"a":{"network":"allowlist","egress":["x.org"],"credentials":[{"host":"x.org","header":"host","value":"${T}"}]}}}`,
			errHas: "frames or routes"},
		{name: "credential proxy header", file: `{"profiles":{"a":{"network":"allowlist","egress":["x.org"],"credentials":[{"host":"x.org","header":"Proxy-Authorization","value":"${T}"}]}}}`,
			errHas: "frames or routes"},
		{name: "credential bad header", file: `{"profiles":{"a":{"network":"allowlist","egress":["x.org"],"credentials":[{"host":"x.org","header":"X Y","value":"${T}"}]}}}`,
			errHas: "want a header name"},
		{name: "credential twice", file: `{"profiles":{"a":{"network":"allowlist","egress":["x.org"],"credentials":[{"host":"x.org","header":"X","value":"${T}"},{"host":"x.org:443","header":"x","value":"${U}"}]}}}`,
			errHas: "given twice"},
		{name: "credential wildcard", file: `{"profiles":{"a":{"network":"allowlist","egress":["*.x.org"],"credentials":[{"host":"*.x.org","header":"X","value":"${T}"}]}}}`,
			errHas: "no wildcard"},
		{name: "credential trailing dot", file: `{"profiles":{"a":{"network":"allowlist","egress":["x.org"],"credentials":[{"host":"x.org.","header":"X","value":"${T}"}]}}}`,
			errHas: "not a host name label"},
		{name: "credential upper case", file: `{"profiles":{"a":{"network":"allowlist","egress":["x.org"],"credentials":[{"host":"X.org","header":"X","value":"${T}"}]}}}`,
			errHas: "lower case"},
		{name: "credential unknown member", file: `{"profiles":{"a":{"network":"allowlist","egress":["x.org"],"credentials":[{"host":"x.org","header":"X","value":"${T}","path":"/"}]}}}`,
			errHas: `field "credentials"`},
		{name: "tokens negative", file: `{"profiles":{"a":{"daily_tokens":-1}}}`, errHas: `field "daily_tokens"`},
		{name: "egress_ask", file: `{"profiles":{"a":{"network":"allowlist","egress_ask":true}}}`,
			want: map[string]domain.Profile{"a": {Name: "a", Network: "allowlist", EgressAsk: true}}},
		{name: "egress_ask without network", file: `{"profiles":{"a":{"egress_ask":true}}}`, errHas: `field "egress_ask": true, but`},
		{name: "egress_ask not a bool", file: `{"profiles":{"a":{"network":"allowlist","egress_ask":"yes"}}}`, errHas: `field "egress_ask"`},
		{name: "model and no transcription", file: `{"profiles":{"cheap":{"model":"claude-haiku-4-5","transcribe":false},"local":{"model":"meta-llama/Llama-3-8b:q4","transcribe":true}}}`,
			want: map[string]domain.Profile{"cheap": {Name: "cheap", Network: "none", Model: "claude-haiku-4-5", NoTranscribe: true},
				"local": {Name: "local", Network: "none", Model: "meta-llama/Llama-3-8b:q4"}}},
		{name: "model empty", file: `{"profiles":{"a":{"model":""}}}`, errHas: `field "model": "": want a model name`},
		{name: "model with space", file: `{"profiles":{"a":{"model":"gpt 4"}}}`, errHas: `field "model"`},
		{name: "model newline", file: `{"profiles":{"a":{"model":"x\ny"}}}`, errHas: `field "model"`},
		{name: "runtime", file: `{"profiles":{"a":{"runtime":"gvisor"},"b":{"runtime":"default"}}}`,
			want: map[string]domain.Profile{"a": {Name: "a", Network: "none", Runtime: "gvisor"}, "b": {Name: "b", Network: "none"}}},
		{name: "runtime unknown", file: `{"profiles":{"a":{"runtime":"runc"}}}`, errHas: `field "runtime": "runc": want "default" or "gvisor"`},
		{name: "runtime not a string", file: `{"profiles":{"a":{"runtime":true}}}`, errHas: `field "runtime"`},
		{name: "transcribe string", file: `{"profiles":{"a":{"transcribe":"no"}}}`, errHas: `field "transcribe": "no": want true or false`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseProfiles([]byte(tt.file))
			if tt.errHas != "" {
				require.Error(t, err)
				require.Contains(t, err.Error(), tt.errHas)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestResolveProfile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	require.NoError(t, os.WriteFile(good, []byte(`{"profiles":{"web":{"network":"allowlist","egress":["pypi.org"]}}}`), 0o600))
	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"profiles":{"web":{"network":"yes"}}}`), 0o600))
	missing := filepath.Join(dir, "missing.json")

	for _, path := range []string{good, bad, missing} {
		p, err := ResolveProfile(path, "")
		require.NoError(t, err, "the built-in default needs no file")
		require.Equal(t, domain.DefaultProfile, p.Name)
		require.False(t, p.HasNetwork())
	}
	p, err := ResolveProfile(good, "web")
	require.NoError(t, err)
	require.True(t, p.HasNetwork())

	_, err = ResolveProfile(good, "nope")
	require.ErrorContains(t, err, `profile "nope" is not defined in `+good)
	_, err = ResolveProfile(bad, "web")
	require.ErrorContains(t, err, "profiles file "+bad+`: profile "web": field "network"`)
	_, err = ResolveProfile(missing, "web")
	require.True(t, errors.Is(err, ErrNoProfiles))
	require.True(t, strings.Contains(err.Error(), missing))
}

func TestExampleProfilesFileIsValid(t *testing.T) {
	ps, err := LoadProfiles("../../configs/profiles.example.json")
	require.NoError(t, err)
	require.Equal(t, []string{"default", "research", "small"}, ps.Names())
}

func FuzzParseProfiles(f *testing.F) {
	f.Add([]byte(`{"profiles":{"research":{"network":"allowlist","egress":["*.github.com:443"],"cpus":1.5,"timeout":"15m"}}}`))
	f.Add([]byte(`{"profiles":{"a":{"memory_mb":64,"daily_tokens":1}}}`))
	f.Add([]byte(`{"profiles":{"a":{"egress":["[::1]:80"]}}}`))
	f.Add([]byte(`{"profiles":{"a":{"network":"allowlist","egress":["*.x.org:443","127.0.0.2:8443"],"credentials":[{"host":"api.x.org","header":"authorization","value":"Bearer ${T}"},{"host":"127.0.0.2:8443","header":"X-K","value":"${A}${B}"}]}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := ParseProfiles(data)
		if err != nil {
			return
		}
		for name, p := range got {
			if name != p.Name || name == domain.DefaultProfile {
				t.Fatalf("profile %q named %q", name, p.Name)
			}
			if p.Network != domain.NetworkNone && p.Network != domain.NetworkAllowlist {
				t.Fatalf("profile %q: network %q accepted", name, p.Network)
			}
			if len(p.Egress) > 0 && !p.HasNetwork() {
				t.Fatalf("profile %q: egress without network accepted", name)
			}
			for _, c := range p.Credentials {
				if !egressAllows(p.Egress, c.Host, c.Port) || domain.ParseTemplate(c.Value) != nil || len(c.Vars()) == 0 ||
					reservedHeaders[c.Header] || strings.ContainsAny(c.Host, "*[] ") || strings.HasSuffix(c.Host, ".") {
					t.Fatalf("profile %q: credential %+v accepted", name, c)
				}
			}
		}
	})
}

// One reading judges every group: the default always runs; a named profile
// only while the file is readable and defines it.
func TestProfilesNowUnusable(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	require.NoError(t, os.WriteFile(good, []byte(`{"profiles":{"web":{"network":"allowlist","egress":["pypi.org"]}}}`), 0o600))
	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"profiles":{"web":{"pids":1}}}`), 0o600))
	missing := filepath.Join(dir, "missing.json")
	groups := []domain.Group{{Folder: "main"}, {Folder: "a", Profile: "default"}, {Folder: "b", Profile: "web"}, {Folder: "c", Profile: "gone"}}

	tests := []struct {
		path            string
		missing, broken bool
		unusable        map[string]string // folder -> part of the reason
	}{
		{good, false, false, map[string]string{"c": `profile "gone" is not defined in ` + good}},
		{bad, false, true, map[string]string{"b": `profile "web": field "pids"`, "c": `profile "web": field "pids"`}},
		{missing, true, false, map[string]string{"b": "no profiles file", "c": "no profiles file"}},
	}
	for _, tt := range tests {
		t.Run(filepath.Base(tt.path), func(t *testing.T) {
			now := ReadProfiles(tt.path)
			require.Equal(t, tt.missing, now.Missing())
			require.Equal(t, tt.broken, now.Broken() != nil)
			got := now.Unusable(groups)
			require.Len(t, got, len(tt.unusable))
			for folder, sub := range tt.unusable {
				require.ErrorContains(t, got[folder], sub)
			}
		})
	}
}
