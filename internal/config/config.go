// Package config reads clawpen's settings from the environment, with a .env
// file in the working directory loaded first (the real environment wins).
package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/joho/godotenv"
)

// Config is the host's configuration. Secrets (TelegramToken, AnthropicKey,
// OpenAIKey) never leave the host process.
type Config struct {
	TelegramToken  string
	TelegramAPIURL string
	OwnerID        int64 // 0: pairing
	AssistantName  string

	DataDir   string
	GroupsDir string

	Sandbox        string // auto, docker, bwrap
	AgentImage     string
	AgentBin       string // "" = beside the clawpen executable, then $PATH
	MountAllowlist string

	MaxConcurrent int
	AgentTimeout  time.Duration

	AnthropicKey     string
	AnthropicBaseURL string
	Model            string
	OpenAIKey        string
	OpenAIBaseURL    string

	TZ *time.Location

	// PassEnv names extra, non-secret variables (CLAWPEN_SANDBOX_ENV) whose
	// values enter sandboxes; PassEnvValues holds them as read at start.
	PassEnv       []string
	PassEnvValues map[string]string

	// DebugAddr (CLAWPEN_DEBUG_ADDR) is a loopback host:port where serve
	// exposes net/http/pprof; "" (the default) serves nothing.
	DebugAddr string
}

// secretish matches variable names that look like credentials; such a name
// never enters a sandbox, even when listed in CLAWPEN_SANDBOX_ENV.
var secretish = regexp.MustCompile(`(?i)(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|COOKIE|(^|_)AUTH($|_))`)

// LooksSecret reports whether a variable name looks like it holds a secret.
func LooksSecret(name string) bool { return secretish.MatchString(name) }

// Defaults as DESIGN.md gives them.
const (
	DefaultTelegramAPIURL = "https://api.telegram.org"
	DefaultAssistantName  = "Andy"
	DefaultAnthropicURL   = "https://api.anthropic.com"
	DefaultOpenAIURL      = "https://api.openai.com/v1"
	DefaultModel          = "claude-sonnet-4-5"
	DefaultAgentImage     = "clawpen-agent:latest"
	DefaultMaxConcurrent  = 3
	DefaultAgentTimeout   = 10 * time.Minute
)

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
		Sandbox:          get("CLAWPEN_SANDBOX", "auto"),
		AgentImage:       get("CLAWPEN_AGENT_IMAGE", DefaultAgentImage),
		AgentBin:         get("CLAWPEN_AGENT_BIN", ""),
		MountAllowlist:   get("CLAWPEN_MOUNT_ALLOWLIST", "~/.config/clawpen/mount-allowlist.json"),
		AnthropicKey:     get("ANTHROPIC_API_KEY", ""),
		AnthropicBaseURL: strings.TrimRight(get("ANTHROPIC_BASE_URL", DefaultAnthropicURL), "/"),
		Model:            get("CLAWPEN_MODEL", DefaultModel),
		OpenAIKey:        get("OPENAI_API_KEY", ""),
		OpenAIBaseURL:    strings.TrimRight(get("OPENAI_BASE_URL", DefaultOpenAIURL), "/"),
		MaxConcurrent:    DefaultMaxConcurrent,
		AgentTimeout:     DefaultAgentTimeout,
		TZ:               time.Local,
	}
	if v := get("CLAWPEN_OWNER_ID", ""); v != "" {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil || id <= 0 {
			errs = append(errs, fmt.Errorf("CLAWPEN_OWNER_ID=%q: want a positive Telegram user id", v))
		}
		c.OwnerID = id
	}
	if !validName(c.AssistantName) {
		errs = append(errs, fmt.Errorf("CLAWPEN_ASSISTANT_NAME=%q: want 1-32 letters, digits or '_'", c.AssistantName))
	}
	switch c.Sandbox {
	case "auto", "docker", "bwrap":
	default:
		errs = append(errs, fmt.Errorf("CLAWPEN_SANDBOX=%q: want auto, docker or bwrap", c.Sandbox))
	}
	if v := get("CLAWPEN_MAX_CONCURRENT", ""); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 64 {
			errs = append(errs, fmt.Errorf("CLAWPEN_MAX_CONCURRENT=%q: want a whole number from 1 to 64", v))
		}
		c.MaxConcurrent = n
	}
	if v := get("CLAWPEN_AGENT_TIMEOUT", ""); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second || d > 24*time.Hour {
			errs = append(errs, fmt.Errorf("CLAWPEN_AGENT_TIMEOUT=%q: want a Go duration from 1s to 24h, e.g. 10m", v))
		}
		c.AgentTimeout = d
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
	if c.DataDir, err = filepath.Abs(c.DataDir); err != nil {
		errs = append(errs, fmt.Errorf("CLAWPEN_DATA_DIR: %w", err))
	}
	if c.GroupsDir, err = filepath.Abs(c.GroupsDir); err != nil {
		errs = append(errs, fmt.Errorf("CLAWPEN_GROUPS_DIR: %w", err))
	}
	c.MountAllowlist = ExpandHome(c.MountAllowlist)
	return c, errors.Join(errs...)
}

// RequireServe checks what `clawpen serve` cannot run without.
func (c Config) RequireServe() error {
	var errs []error
	if c.TelegramToken == "" {
		errs = append(errs, errors.New("TELEGRAM_BOT_TOKEN is not set: create a bot with @BotFather and put its token in .env"))
	} else if !strings.Contains(c.TelegramToken, ":") {
		errs = append(errs, errors.New("TELEGRAM_BOT_TOKEN looks malformed: a bot token is '<digits>:<secret>' as @BotFather prints it"))
	}
	if c.AnthropicKey == "" && c.OpenAIKey == "" {
		errs = append(errs, errors.New("no model key: set ANTHROPIC_API_KEY (or OPENAI_API_KEY with OPENAI_BASE_URL) in .env"))
	}
	return errors.Join(errs...)
}

// Provider is the model provider the agents use: anthropic unless only an
// OpenAI-compatible key is configured.
func (c Config) Provider() string {
	if c.AnthropicKey == "" && c.OpenAIKey != "" {
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

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

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
