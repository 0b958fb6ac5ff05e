// Package config reads clawpen's settings from the environment, with a .env
// file in the working directory loaded first (the real environment wins).
package config

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/joho/godotenv"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/transcribe"
)

// Config is the host's configuration. Secrets (TelegramToken, AnthropicKey,
// OpenAIKey, DatabaseURL) never leave the host process.
type Config struct {
	TelegramToken  string
	TelegramAPIURL string
	OwnerID        int64 // 0: pairing
	AssistantName  string

	DataDir   string
	GroupsDir string
	// DatabaseURL (CLAWPEN_DATABASE_URL) is a postgres:// URL: the state
	// lives in that PostgreSQL database, and one host serves it at a time.
	// "" (the default) is SQLite in the data dir.
	DatabaseURL string
	// HostRoot (CLAWPEN_HOST_ROOT) is set when the host itself runs in a
	// container: it is where Root (CLAWPEN_ROOT, the image's /app) lies on
	// the Docker host, whose engine binds every sandbox's sources. Only paths
	// under Root can be bound; the data and groups dirs must be there.
	Root, HostRoot string

	Sandbox        string // auto, docker, bwrap, gvisor
	SandboxUser    string // the host user a root host runs sandboxes as
	AgentImage     string
	AgentBin       string // "" = beside the clawpen executable, then $PATH
	MountAllowlist string
	// Profiles (CLAWPEN_PROFILES) is the admin's sandbox profiles file,
	// read at each run; never mounted.
	Profiles string
	// ToolsDir (CLAWPEN_TOOLS_DIR) holds the owner's bridge tool
	// definitions, read again when they change; never mounted.
	ToolsDir string
	// UpstreamCAFile (CLAWPEN_UPSTREAM_CA_FILE) holds PEM certificates the
	// host trusts, beside the system roots, for upstreams it injects
	// credentials for; "": the system roots only.
	UpstreamCAFile string
	// getenv is where the host's environment is read: bridge tools and
	// credentials name the variables they need (HostEnv).
	getenv func(string) string

	MaxConcurrent int
	AgentTimeout  time.Duration
	// Warm is how many sandboxes are kept started ahead of their jobs
	// (main's, then the most recently active groups'); 0 turns it off.
	// WarmIdle is how long one waits before it is dropped.
	Warm     int
	WarmIdle time.Duration
	// DiskMB is the disk quota of a group's folder and session dir together
	// (CLAWPEN_DISK_MB), for groups whose profile sets none.
	DiskMB int64
	// EgressMB caps the bytes, both ways, a run moves through the egress
	// proxy (CLAWPEN_EGRESS_MB); past it every transfer of the run is cut.
	EgressMB int64
	// MaxFileMB caps a file users send that the host fetches into a
	// group's inbox (CLAWPEN_MAX_FILE_MB); a larger one is noted, not fetched.
	MaxFileMB int64

	AnthropicKey     string
	AnthropicBaseURL string
	Model            string
	OpenAIKey        string
	OpenAIBaseURL    string
	// openAISet: OPENAI_API_KEY or OPENAI_BASE_URL was given. A local
	// OpenAI-compatible server (Ollama, llama.cpp) needs no key.
	openAISet bool
	// MaxTokens (CLAWPEN_MAX_TOKENS) caps max_tokens of every model request
	// the host proxies; 0 leaves the proxy's default.
	MaxTokens int64
	// ContextTokens (CLAWPEN_CONTEXT_TOKENS) is the estimated size past
	// which a group's conversation is compacted.
	ContextTokens int64

	TZ *time.Location

	// PassEnv names extra, non-secret variables (CLAWPEN_SANDBOX_ENV) whose
	// values enter sandboxes; PassEnvValues holds them as read at start.
	PassEnv       []string
	PassEnvValues map[string]string

	// DebugAddr (CLAWPEN_DEBUG_ADDR) is a loopback host:port where serve
	// exposes net/http/pprof; "" (the default) serves nothing.
	DebugAddr string
	// Debug (CLAWPEN_DEBUG) turns on debug logs: ids and sizes, never
	// message text.
	Debug bool

	// DockerRuntime (CLAWPEN_DOCKER_RUNTIME) is the OCI runtime of sandbox
	// containers, e.g. gVisor's runsc; "" is the engine's default.
	DockerRuntime string
	// RetryBackoff (CLAWPEN_RETRY_BACKOFF) is the waits between retries of a
	// failed agent run before the chat is told.
	RetryBackoff []time.Duration
	// MinInterval (CLAWPEN_MIN_INTERVAL) is the shortest repeat a scheduled
	// task may have; tests lower it.
	MinInterval time.Duration
	// SenderPolicy (CLAWPEN_SENDER_POLICY) is the sender policy of groups
	// that have none of their own.
	SenderPolicy domain.SenderPolicy
	// SenderRate (CLAWPEN_SENDER_RATE) is how often one member of a
	// non-main group may call the agent per hour, for groups whose sender
	// policy sets no rate; 0: no limit.
	SenderRate int
	// ApprovalTimeout (CLAWPEN_APPROVAL_TIMEOUT) is how long a request
	// waits for the owner's press; no answer within it is a denial.
	ApprovalTimeout time.Duration
	// ClockOffset (CLAWPEN_CLOCK_OFFSET) is a test knob: it moves the clock
	// of token usage days and budgets, so that a test can reach tomorrow
	// without waiting for it. Zero in production.
	ClockOffset time.Duration

	// MetricsAddr (CLAWPEN_METRICS_ADDR) is the host:port of /metrics,
	// /healthz and /readyz; "" (the default) serves none.
	MetricsAddr string
	// LogFormat (CLAWPEN_LOG_FORMAT) is "text" (the default) or "json".
	LogFormat string
	// Transcribe says how voice notes, audio and video notes become text
	// (CLAWPEN_TRANSCRIBE): TranscribeOff, TranscribeOpenAI (an
	// OpenAI-compatible endpoint at TranscribeURL, with TranscribeKey and
	// TranscribeModel) or TranscribeCommand (TranscribeCmd, run like a
	// bridge tool). TranscribeKey is a secret: it never leaves the host but
	// towards TranscribeURL.
	Transcribe        string
	TranscribeURL     string
	TranscribeModel   string
	TranscribeKey     string
	TranscribeCmd     []string
	TranscribeTimeout time.Duration
	// TranscribeDailySeconds is how much audio a group other than main may
	// have transcribed a day (CLAWPEN_TRANSCRIBE_DAILY_MINUTES); 0: no limit.
	TranscribeDailySeconds int64

	// Retention (CLAWPEN_RETENTION) is how long stored messages a run no
	// longer needs, task-run logs and audit entries are kept; 0 (the
	// default) keeps them.
	Retention time.Duration
}

// UsageNow is the clock of token usage days: now, moved by ClockOffset.
func (c Config) UsageNow() time.Time { return time.Now().Add(c.ClockOffset) }

// secretish matches variable names that look like credentials; such a name
// never enters a sandbox, even when listed in CLAWPEN_SANDBOX_ENV.
var secretish = regexp.MustCompile(`(?i)(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|COOKIE|(^|_)AUTH($|_)|DATABASE_URL)`)

// LooksSecret reports whether a variable name looks like it holds a secret.
func LooksSecret(name string) bool { return secretish.MatchString(name) }

// Defaults as DESIGN.md gives them.
const (
	DefaultTelegramAPIURL = "https://api.telegram.org"
	DefaultAssistantName  = "Andy"
	DefaultAnthropicURL   = "https://api.anthropic.com"
	DefaultOpenAIURL      = "https://api.openai.com/v1"
	DefaultModel          = "claude-sonnet-4-5"
	// DefaultOpenAIModel is the model when only an OpenAI-compatible
	// provider is configured and CLAWPEN_MODEL is not set.
	DefaultOpenAIModel   = "gpt-4.1-mini"
	DefaultAgentImage    = "clawpen-agent:latest"
	DefaultSandboxUser   = "clawpen-sandbox"
	DefaultMaxConcurrent = 3
	DefaultWarm          = 3 // main plus the 2 most recently active groups
	DefaultWarmIdle      = 10 * time.Minute
	DefaultAgentTimeout  = 10 * time.Minute
	DefaultDiskMB        = 1024
	DefaultEgressMB      = 1024
	DefaultMaxFileMB     = 20 // the Bot API's own download limit
	DefaultMinInterval   = time.Minute
	DefaultSenderRate    = 20 // calls per member and hour
	DefaultApproval      = 2 * time.Minute

	TranscribeOff     = "off"
	TranscribeOpenAI  = "openai"
	TranscribeCommand = "command"
	// DefaultTranscribeURL is OpenAI's; requests go to <url>/v1/audio/transcriptions.
	DefaultTranscribeURL     = "https://api.openai.com"
	DefaultTranscribeModel   = "whisper-1"
	DefaultTranscribeTimeout = 2 * time.Minute
	DefaultTranscribeMinutes = 60
)

// DefaultRetryBackoff is CLAWPEN_RETRY_BACKOFF's default.
func DefaultRetryBackoff() []time.Duration {
	return []time.Duration{5 * time.Second, 30 * time.Second, 2 * time.Minute}
}

// LoadDotEnv loads path (usually ".env") into the process environment without
// overriding variables already set. A missing file is not an error.
func LoadDotEnv(path string) error {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := godotenv.Load(path); err != nil {
		return fmt.Errorf("load %s: %w", path, err)
	}
	return nil
}

// FromEnv builds a Config from getenv. It collects every malformed value into
// one error so the operator can fix them all at once. Required-ness of the
// token and keys is checked by RequireServe, since the CLI works without them.
func FromEnv(getenv func(string) string) (Config, error) {
	var errs []error
	get := func(name, def string) string {
		if v := strings.TrimSpace(getenv(name)); v != "" {
			return v
		}
		return def
	}
	c := Config{
		TelegramToken:    get("TELEGRAM_BOT_TOKEN", ""),
		TelegramAPIURL:   strings.TrimRight(get("TELEGRAM_API_URL", DefaultTelegramAPIURL), "/"),
		AssistantName:    get("CLAWPEN_ASSISTANT_NAME", DefaultAssistantName),
		DataDir:          get("CLAWPEN_DATA_DIR", "./data"),
		GroupsDir:        get("CLAWPEN_GROUPS_DIR", "./groups"),
		DatabaseURL:      get("CLAWPEN_DATABASE_URL", ""),
		Sandbox:          get("CLAWPEN_SANDBOX", "auto"),
		SandboxUser:      get("CLAWPEN_SANDBOX_USER", DefaultSandboxUser),
		AgentImage:       get("CLAWPEN_AGENT_IMAGE", DefaultAgentImage),
		AgentBin:         get("CLAWPEN_AGENT_BIN", ""),
		MountAllowlist:   get("CLAWPEN_MOUNT_ALLOWLIST", "~/.config/clawpen/mount-allowlist.json"),
		Profiles:         get("CLAWPEN_PROFILES", "~/.config/clawpen/profiles.json"),
		ToolsDir:         get("CLAWPEN_TOOLS_DIR", "~/.config/clawpen/tools"),
		UpstreamCAFile:   get("CLAWPEN_UPSTREAM_CA_FILE", ""),
		getenv:           getenv,
		AnthropicKey:     get("ANTHROPIC_API_KEY", ""),
		AnthropicBaseURL: strings.TrimRight(get("ANTHROPIC_BASE_URL", DefaultAnthropicURL), "/"),
		Model:            get("CLAWPEN_MODEL", ""),
		OpenAIKey:        get("OPENAI_API_KEY", ""),
		OpenAIBaseURL:    strings.TrimRight(get("OPENAI_BASE_URL", DefaultOpenAIURL), "/"),
		openAISet:        get("OPENAI_API_KEY", "") != "" || get("OPENAI_BASE_URL", "") != "",
		MaxConcurrent:    DefaultMaxConcurrent,
		Warm:             DefaultWarm,
		WarmIdle:         DefaultWarmIdle,
		AgentTimeout:     DefaultAgentTimeout,
		DiskMB:           DefaultDiskMB,
		MaxFileMB:        DefaultMaxFileMB,
		EgressMB:         DefaultEgressMB,
		TZ:               time.Local,
		DockerRuntime:    get("CLAWPEN_DOCKER_RUNTIME", ""),
		RetryBackoff:     DefaultRetryBackoff(),
		MinInterval:      DefaultMinInterval,
		SenderPolicy:     domain.DefaultSenderPolicy,
		SenderRate:       DefaultSenderRate,
		ApprovalTimeout:  DefaultApproval,
		MetricsAddr:      get("CLAWPEN_METRICS_ADDR", ""),
		LogFormat:        get("CLAWPEN_LOG_FORMAT", "text"),

		Transcribe:             get("CLAWPEN_TRANSCRIBE", TranscribeOff),
		TranscribeURL:          strings.TrimRight(get("CLAWPEN_TRANSCRIBE_URL", DefaultTranscribeURL), "/"),
		TranscribeModel:        get("CLAWPEN_TRANSCRIBE_MODEL", DefaultTranscribeModel),
		TranscribeKey:          get("CLAWPEN_TRANSCRIBE_KEY", get("OPENAI_API_KEY", "")),
		TranscribeTimeout:      DefaultTranscribeTimeout,
		TranscribeDailySeconds: DefaultTranscribeMinutes * 60,
		ContextTokens:          domain.DefaultContextTokens,
	}
	if v := get("CLAWPEN_OWNER_ID", ""); v != "" {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil || id <= 0 {
			errs = append(errs, fmt.Errorf("CLAWPEN_OWNER_ID=%q: want a positive Telegram user id", v))
		}
		c.OwnerID = id
	}
	if c.Model == "" {
		c.Model = DefaultModel
		if c.Provider() == "openai" {
			c.Model = DefaultOpenAIModel
		}
	}
	if !validName(c.AssistantName) {
		errs = append(errs, fmt.Errorf("CLAWPEN_ASSISTANT_NAME=%q: want 1-32 letters, digits or '_'", c.AssistantName))
	}
	switch c.Sandbox {
	case "auto", "docker", "bwrap", "gvisor":
	default:
		errs = append(errs, fmt.Errorf("CLAWPEN_SANDBOX=%q: want auto, docker, bwrap or gvisor", c.Sandbox))
	}
	if v := get("CLAWPEN_MAX_CONCURRENT", ""); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 64 {
			errs = append(errs, fmt.Errorf("CLAWPEN_MAX_CONCURRENT=%q: want a whole number from 1 to 64", v))
		}
		c.MaxConcurrent = n
	}
	if v := get("CLAWPEN_MAX_TOKENS", ""); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 || n > 1_000_000 {
			errs = append(errs, fmt.Errorf("CLAWPEN_MAX_TOKENS=%q: want a whole number from 1 to 1000000", v))
		}
		c.MaxTokens = n
	}
	if v := get("CLAWPEN_CONTEXT_TOKENS", ""); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		// Past a million tokens, the transcript passes what the model
		// proxy takes in one request (8 MiB) before it is compacted.
		if err != nil || n < 1000 || n > 1_000_000 {
			errs = append(errs, fmt.Errorf("CLAWPEN_CONTEXT_TOKENS=%q: want a whole number of tokens from 1000 to 1000000", v))
		}
		c.ContextTokens = n
	}
	if v := get("CLAWPEN_WARM", ""); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 64 {
			errs = append(errs, fmt.Errorf("CLAWPEN_WARM=%q: want a whole number from 0 (off) to 64", v))
		}
		c.Warm = n
	}
	if v := get("CLAWPEN_WARM_IDLE", ""); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second || d > 24*time.Hour {
			errs = append(errs, fmt.Errorf("CLAWPEN_WARM_IDLE=%q: want a Go duration from 1s to 24h, e.g. 10m", v))
		}
		c.WarmIdle = d
	}
	if v := get("CLAWPEN_AGENT_TIMEOUT", ""); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second || d > 24*time.Hour {
			errs = append(errs, fmt.Errorf("CLAWPEN_AGENT_TIMEOUT=%q: want a Go duration from 1s to 24h, e.g. 10m", v))
		}
		c.AgentTimeout = d
	}
	if v := get("CLAWPEN_DISK_MB", ""); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 || n > 1<<30 {
			errs = append(errs, fmt.Errorf("CLAWPEN_DISK_MB=%q: want a whole number of megabytes (MiB), at least 1", v))
		}
		c.DiskMB = n
	}
	if v := get("CLAWPEN_EGRESS_MB", ""); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 || n > 1<<30 {
			errs = append(errs, fmt.Errorf("CLAWPEN_EGRESS_MB=%q: want a whole number of megabytes (MiB), at least 1", v))
		}
		c.EgressMB = n
	}
	if v := get("CLAWPEN_MAX_FILE_MB", ""); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 || n > 2000 {
			errs = append(errs, fmt.Errorf("CLAWPEN_MAX_FILE_MB=%q: want a whole number of megabytes (MiB), 1 to 2000", v))
		}
		c.MaxFileMB = n
	}
	for name, u := range map[string]string{
		"TELEGRAM_API_URL":   c.TelegramAPIURL,
		"ANTHROPIC_BASE_URL": c.AnthropicBaseURL,
		"OPENAI_BASE_URL":    c.OpenAIBaseURL,
	} {
		if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			errs = append(errs, fmt.Errorf("%s=%q: want an http:// or https:// URL", name, u))
		}
	}
	if v := get("TZ", ""); v != "" {
		loc, err := time.LoadLocation(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("TZ=%q: %w", v, err))
		} else {
			c.TZ = loc
		}
	}
	if v := get("CLAWPEN_DEBUG_ADDR", ""); v != "" {
		if err := CheckDebugAddr(v); err != nil {
			errs = append(errs, fmt.Errorf("CLAWPEN_DEBUG_ADDR=%q: %w", v, err))
		}
		c.DebugAddr = v
	}
	if v := get("CLAWPEN_DEBUG", ""); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("CLAWPEN_DEBUG=%q: want 1 (debug logs) or 0", v))
		}
		c.Debug = b
	}
	if c.MetricsAddr != "" {
		if err := checkHostPort(c.MetricsAddr); err != nil {
			errs = append(errs, fmt.Errorf("CLAWPEN_METRICS_ADDR=%q: %w", c.MetricsAddr, err))
		}
	}
	if v := get("CLAWPEN_RETENTION", ""); v != "" {
		d, err := parseRetention(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("CLAWPEN_RETENTION=%q: %w", v, err))
		}
		c.Retention = d
	}
	if c.DatabaseURL != "" {
		if u, err := url.Parse(c.DatabaseURL); err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Opaque != "" {
			// Not the value: it may hold a password.
			errs = append(errs, errors.New("CLAWPEN_DATABASE_URL: want a URL postgres://user:password@host:port/database (its value is not shown: it may hold a password)"))
		}
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		errs = append(errs, fmt.Errorf("CLAWPEN_LOG_FORMAT=%q: want text or json", c.LogFormat))
	}
	if c.DockerRuntime != "" && !runtimeName.MatchString(c.DockerRuntime) {
		errs = append(errs, fmt.Errorf("CLAWPEN_DOCKER_RUNTIME=%q: want the name of an OCI runtime the engine knows, e.g. runsc", c.DockerRuntime))
	}
	if v := get("CLAWPEN_RETRY_BACKOFF", ""); v != "" {
		c.RetryBackoff = nil
		for _, part := range strings.Split(v, ",") {
			d, err := time.ParseDuration(strings.TrimSpace(part))
			if err != nil || d < 0 {
				errs = append(errs, fmt.Errorf("CLAWPEN_RETRY_BACKOFF=%q: want Go durations separated by commas, e.g. 5s,30s,2m", v))
				break
			}
			c.RetryBackoff = append(c.RetryBackoff, d)
		}
	}
	if v := get("CLAWPEN_CLOCK_OFFSET", ""); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("CLAWPEN_CLOCK_OFFSET=%q: want a Go duration, e.g. 24h (a test knob: leave it unset)", v))
		}
		c.ClockOffset = d
	}
	if v := get("CLAWPEN_MIN_INTERVAL", ""); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second {
			errs = append(errs, fmt.Errorf("CLAWPEN_MIN_INTERVAL=%q: want a Go duration of at least 1s, e.g. 1m", v))
		}
		c.MinInterval = d
	}
	if v := get("CLAWPEN_SENDER_POLICY", ""); v != "" {
		p, err := domain.ParseSenderPolicy([]byte(v), domain.DefaultSenderPolicy)
		if err != nil {
			errs = append(errs, fmt.Errorf("CLAWPEN_SENDER_POLICY=%q: %w", v, err))
		}
		c.SenderPolicy = p
	}
	if v := get("CLAWPEN_SENDER_RATE", ""); v != "" {
		n, err := domain.ParseSenderRate(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("CLAWPEN_SENDER_RATE=%q: %w", v, err))
		}
		c.SenderRate = n
	}
	if v := get("CLAWPEN_APPROVAL_TIMEOUT", ""); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second || d > 24*time.Hour {
			errs = append(errs, fmt.Errorf("CLAWPEN_APPROVAL_TIMEOUT=%q: want a Go duration from 1s to 24h, e.g. 2m", v))
		}
		c.ApprovalTimeout = d
	}
	errs = append(errs, c.transcriber(get)...)
	c.PassEnvValues = map[string]string{}
	for _, name := range strings.Split(get("CLAWPEN_SANDBOX_ENV", ""), ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if !envName.MatchString(name) {
			errs = append(errs, fmt.Errorf("CLAWPEN_SANDBOX_ENV: %q is not a variable name", name))
			continue
		}
		c.PassEnv = append(c.PassEnv, name)
		if v := getenv(name); v != "" && !LooksSecret(name) {
			c.PassEnvValues[name] = v
		}
	}
	var err error
	if c.DataDir, err = resolveDir(c.DataDir); err != nil {
		errs = append(errs, fmt.Errorf("CLAWPEN_DATA_DIR: %w", err))
	}
	if c.GroupsDir, err = resolveDir(c.GroupsDir); err != nil {
		errs = append(errs, fmt.Errorf("CLAWPEN_GROUPS_DIR: %w", err))
	}
	c.MountAllowlist = ExpandHome(c.MountAllowlist)
	c.Profiles = ExpandHome(c.Profiles)
	c.ToolsDir = ExpandHome(c.ToolsDir)
	c.UpstreamCAFile = ExpandHome(c.UpstreamCAFile)
	errs = append(errs, c.hostRoot(get("CLAWPEN_ROOT", ""), get("CLAWPEN_HOST_ROOT", ""))...)
	return c, errors.Join(errs...)
}

// DatabasePassword is the password CLAWPEN_DATABASE_URL carries ("" for
// none), in its user part or as a password= parameter: logs redact it.
func (c Config) DatabasePassword() string {
	u, err := url.Parse(c.DatabaseURL)
	if err != nil || c.DatabaseURL == "" {
		return ""
	}
	if p, ok := u.User.Password(); ok {
		return p
	}
	return u.Query().Get("password")
}

// transcriber checks the CLAWPEN_TRANSCRIBE variables. The key is
// CLAWPEN_TRANSCRIBE_KEY, else OPENAI_API_KEY: never the Anthropic key,
// which would then reach another company's server. Only a server other
// than OpenAI's (a local one) may go without a key.
func (c *Config) transcriber(get func(name, def string) string) []error {
	var errs []error
	switch c.Transcribe {
	case TranscribeOff:
	case TranscribeOpenAI:
		if !strings.HasPrefix(c.TranscribeURL, "http://") && !strings.HasPrefix(c.TranscribeURL, "https://") {
			errs = append(errs, fmt.Errorf("CLAWPEN_TRANSCRIBE_URL=%q: want an http:// or https:// URL (without /v1)", c.TranscribeURL))
		}
		if c.TranscribeKey == "" && c.TranscribeURL == DefaultTranscribeURL {
			errs = append(errs, errors.New("CLAWPEN_TRANSCRIBE=openai needs OPENAI_API_KEY or CLAWPEN_TRANSCRIBE_KEY (only a server of your own at CLAWPEN_TRANSCRIBE_URL may go without)"))
		}
	case TranscribeCommand:
		argv, err := transcribe.ParseCommand(get("CLAWPEN_TRANSCRIBE_CMD", ""))
		if err != nil {
			errs = append(errs, fmt.Errorf("CLAWPEN_TRANSCRIBE_CMD: %w", err))
		}
		c.TranscribeCmd = argv
	default:
		errs = append(errs, fmt.Errorf("CLAWPEN_TRANSCRIBE=%q: want off, openai or command", c.Transcribe))
	}
	if v := get("CLAWPEN_TRANSCRIBE_TIMEOUT", ""); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second || d > time.Hour {
			errs = append(errs, fmt.Errorf("CLAWPEN_TRANSCRIBE_TIMEOUT=%q: want a Go duration from 1s to 1h, e.g. 2m", v))
		}
		c.TranscribeTimeout = d
	}
	if v := get("CLAWPEN_TRANSCRIBE_DAILY_MINUTES", ""); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n > 24*60 {
			errs = append(errs, fmt.Errorf("CLAWPEN_TRANSCRIBE_DAILY_MINUTES=%q: want whole minutes from 0 (no limit) to 1440", v))
		}
		c.TranscribeDailySeconds = n * 60
	}
	return errs
}

// HostEnv is the host's value of name, for a bridge tool's process or a
// profile's credential, which name the variables they need: those are not
// known when the configuration is read, so it keeps the environment it was
// read from.
func (c Config) HostEnv(name string) string {
	if c.getenv == nil {
		return ""
	}
	return c.getenv(name)
}

// hostRoot sets Root and HostRoot. CLAWPEN_ROOT alone changes nothing (the
// image sets it); with CLAWPEN_HOST_ROOT both must be absolute, and the data
// and groups dirs lie under Root, or no sandbox could be given its folders.
func (c *Config) hostRoot(root, hostRoot string) []error {
	if hostRoot == "" {
		return nil
	}
	if root == "" || !filepath.IsAbs(root) || !filepath.IsAbs(hostRoot) {
		return []error{fmt.Errorf("CLAWPEN_HOST_ROOT=%q with CLAWPEN_ROOT=%q: want two absolute paths, the Docker host's directory and where it is mounted in this container (docs/host-container.md)", hostRoot, root)}
	}
	c.Root, c.HostRoot = filepath.Clean(root), filepath.Clean(hostRoot)
	var errs []error
	for _, d := range []struct{ name, dir string }{{"CLAWPEN_DATA_DIR", c.DataDir}, {"CLAWPEN_GROUPS_DIR", c.GroupsDir}} {
		if rel, err := filepath.Rel(c.Root, d.dir); err != nil || !filepath.IsLocal(rel) {
			errs = append(errs, fmt.Errorf("%s=%s is outside CLAWPEN_ROOT=%s: a host in a container can hand the Docker engine only paths under CLAWPEN_ROOT", d.name, d.dir, c.Root))
		}
	}
	return errs
}

// RequireServe checks what `clawpen serve` cannot run without.
func (c Config) RequireServe() error {
	var errs []error
	if c.TelegramToken == "" {
		errs = append(errs, errors.New("TELEGRAM_BOT_TOKEN is not set: create a bot with @BotFather and put its token in .env"))
	} else if !strings.Contains(c.TelegramToken, ":") {
		errs = append(errs, errors.New("TELEGRAM_BOT_TOKEN looks malformed: a bot token is '<digits>:<secret>' as @BotFather prints it"))
	}
	if c.AnthropicKey == "" && !c.openAISet {
		errs = append(errs, errors.New("no model provider: set ANTHROPIC_API_KEY, or OPENAI_API_KEY (and OPENAI_BASE_URL for another OpenAI-compatible server; a local one without a key needs only OPENAI_BASE_URL) in .env"))
	}
	return errors.Join(errs...)
}

// Provider is the model provider the agents use: anthropic unless only an
// OpenAI-compatible provider (a key, or a server URL) is configured.
func (c Config) Provider() string {
	if c.AnthropicKey == "" && c.openAISet {
		return "openai"
	}
	return "anthropic"
}

// SandboxEnv is the complete environment an agent sandbox gets: only
// non-secret values, chosen by name here, never copied wholesale.
func (c Config) SandboxEnv() map[string]string {
	env := map[string]string{
		"CLAWPEN_ASSISTANT_NAME": c.AssistantName,
		"CLAWPEN_MODEL":          c.Model,
		"TZ":                     c.TZ.String(),
		"LANG":                   "C.UTF-8",
	}
	if env["TZ"] == "Local" {
		delete(env, "TZ")
	}
	for k, v := range c.PassEnvValues {
		if _, fixed := env[k]; !fixed && !LooksSecret(k) {
			env[k] = v
		}
	}
	return env
}

// CheckDebugAddr accepts only a loopback host:port (127.0.0.0/8, ::1 or
// localhost): profiles and goroutine dumps reveal the host's internals and
// the endpoint has no authentication, so it must not be reachable from the
// network. Sandboxes have their own network namespace and cannot reach it.
func CheckDebugAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("want host:port on loopback, e.g. 127.0.0.1:6060: %w", err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("port %q is not a number from 0 to 65535", port)
	}
	if strings.EqualFold(host, "localhost") {
		return nil
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || ip.Zone() != "" || !ip.Unmap().IsLoopback() {
		return fmt.Errorf("host %q is not a loopback address: the debug endpoint listens on 127.0.0.1 or ::1 only", host)
	}
	return nil
}

// parseRetention reads CLAWPEN_RETENTION: whole days ("90d") or a Go
// duration ("2160h"), at least a day, so no unit slip prunes what was
// written this morning; "0" or "keep" keeps everything.
func parseRetention(v string) (time.Duration, error) {
	if v == "0" || strings.EqualFold(v, "keep") {
		return 0, nil
	}
	var d time.Duration
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 || n > 36500 {
			return 0, errors.New("want whole days (90d), a Go duration (2160h), or keep")
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			return 0, errors.New("want whole days (90d), a Go duration (2160h), or keep")
		}
	}
	if d < 24*time.Hour {
		return 0, errors.New("at least 1d: shorter would prune the history of today's conversations")
	}
	return d, nil
}

// checkHostPort accepts host:port with a port from 0 to 65535; an empty
// host listens on every address.
func checkHostPort(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("want host:port, e.g. 127.0.0.1:9464: %w", err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("port %q is not a number from 0 to 65535", port)
	}
	return nil
}

var (
	envName     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	runtimeName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)
)

func validName(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

// ExpandHome replaces a leading "~/" with the user's home directory.
func ExpandHome(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, strings.TrimPrefix(p, "~"))
		}
	}
	return p
}

// resolveDir makes dir absolute and resolves every symlink in the part of
// it that exists, now, at start: the host opens the group folders and
// session dirs below it with no symlink allowed in any component (package
// beneath), so a symlink found there later was swapped in, and refused.
func resolveDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	var missing []string
	for p := abs; ; p = filepath.Dir(p) {
		r, err := filepath.EvalSymlinks(p)
		if err == nil {
			return filepath.Join(append([]string{r}, missing...)...), nil
		}
		if !errors.Is(err, fs.ErrNotExist) || p == "/" {
			return "", err
		}
		missing = append([]string{filepath.Base(p)}, missing...)
	}
}
