package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/clawpen/clawpen/internal/cgroup"
	"github.com/clawpen/clawpen/internal/config"
	"github.com/clawpen/clawpen/internal/hostsock"
	"github.com/clawpen/clawpen/internal/mounts"
	"github.com/clawpen/clawpen/internal/runner"
	"github.com/clawpen/clawpen/internal/sandbox"
	"github.com/clawpen/clawpen/internal/sandbox/bwrap"
	"github.com/clawpen/clawpen/internal/telegram"
	"github.com/clawpen/clawpen/internal/tools"
)

// Verdict is how one of doctor's checks came out.
type Verdict string

// Verdicts: a Fail makes `clawpen doctor` exit non-zero.
const (
	OK   Verdict = "ok"
	Warn Verdict = "warn"
	Fail Verdict = "FAIL"
)

// Finding is one check's outcome and, unless it is OK, how to fix it.
type Finding struct {
	Name    string
	Verdict Verdict
	Detail  string
	Fix     string
}

// Report prints findings and says whether none failed.
func Report(w io.Writer, fs []Finding) bool {
	ok := true
	for _, f := range fs {
		fmt.Fprintf(w, "%-4s %-10s %s\n", f.Verdict, f.Name, f.Detail)
		if f.Fix != "" && f.Verdict != OK {
			fmt.Fprintf(w, "     %-10s fix: %s\n", "", f.Fix)
		}
		if f.Verdict == Fail {
			ok = false
		}
	}
	return ok
}

// providerTimeout bounds doctor's one request to the model provider.
const providerTimeout = 30 * time.Second

// Doctor takes the steps serve takes at start, through the same functions,
// and says for each whether it works here and, when not, how to fix it. What
// serve prepares in place (data dir, database, groups dir) doctor prepares
// too; what serve names after its data dir (pins, sandbox cgroups) doctor
// makes under names of its own and removes, so it can run beside a serving
// host. Where serve works, doctor passes.
func Doctor(ctx context.Context, cfg config.Config) []Finding {
	var fs []Finding
	add := func(name string, v Verdict, detail, fix string) {
		fs = append(fs, Finding{Name: name, Verdict: v, Detail: detail, Fix: fix})
	}

	fs = append(fs, telegramFinding(ctx, cfg))
	fs = append(fs, providerFinding(ctx, cfg, &http.Client{Timeout: providerTimeout}))
	fs = append(fs, transcriberFinding(ctx, cfg, &http.Client{Timeout: providerTimeout}))
	fs = append(fs, dataFindings(ctx, cfg)...)

	uid, gid, userErr := SandboxUser(cfg.SandboxUser)
	fs = append(fs, sandboxUserFinding(cfg, uid, gid, userErr))
	fs = append(fs, socketFinding(cfg, uid, gid))
	fs = append(fs, privateFinding(cfg, gid))
	bin, binErr := AgentBin(cfg)
	if binErr != nil {
		add("agent", Fail, binErr.Error(), "run `make build` (builds bin/clawpen and bin/clawpen-agent)")
	} else {
		add("agent", OK, bin, "")
	}

	inst, cleanup := doctorInstance(cfg)
	defer cleanup()
	// As serve: CLAWPEN_SANDBOX=docker never tries bwrap, =bwrap never Docker.
	bwrapOK, dockerOK := false, false
	gf, gvisorOK := gvisorFinding(ctx, cfg, inst, uid, gid, userErr)
	fs = append(fs, gf)
	if cfg.Sandbox == "gvisor" {
		fs = append(fs, backendFinding(cfg.Sandbox, gvisorOK, false))
	}
	if cfg.Sandbox != "docker" && cfg.Sandbox != "gvisor" {
		fs = append(fs, cgroupFinding(cfg))
		var bf []Finding
		bf, bwrapOK = bwrapFindings(ctx, cfg, inst, uid, gid, userErr, binErr)
		fs = append(fs, bf...)
	}
	if cfg.Sandbox != "bwrap" && cfg.Sandbox != "gvisor" {
		var df Finding
		df, dockerOK = dockerFinding(ctx, cfg, inst, uid, gid, userErr)
		fs = append(fs, df)
	}
	if cfg.Sandbox != "gvisor" {
		fs = append(fs, backendFinding(cfg.Sandbox, bwrapOK, dockerOK))
	}

	fs = append(fs, allowlistFinding(cfg, slog.New(slog.DiscardHandler)))
	fs = append(fs, profilesFinding(ctx, cfg))
	if f, ok := toolsFinding(cfg); ok {
		fs = append(fs, f)
	}
	if f, ok := credentialsFinding(cfg); ok {
		fs = append(fs, f)
	}
	for _, name := range cfg.PassEnv {
		if config.LooksSecret(name) {
			add("env", Warn, fmt.Sprintf("CLAWPEN_SANDBOX_ENV lists %s, which looks like a secret; it is NOT passed into sandboxes", name),
				"remove "+name+" from CLAWPEN_SANDBOX_ENV; credentials stay in the host")
		}
	}
	return fs
}

// doctorInstance is doctor's own pins and cgroups, and their removal.
func doctorInstance(cfg config.Config) (instance, func()) { return ownInstance(cfg, "doctor") }

// ownInstance is pins and cgroups of a command's own (doctor, run), and
// their removal; the cgroups are removed with the backend.
func ownInstance(cfg config.Config, who string) (instance, func()) {
	var rnd [6]byte
	_, _ = rand.Read(rnd[:]) // never fails (crypto/rand)
	suffix := "-" + who + "-" + hex.EncodeToString(rnd[:])
	inst := instance{bwrapPins: PinDir(cfg) + suffix, dockerPins: filepath.Join(cfg.DataDir, "pins"+suffix),
		cgroup: "clawpen" + suffix, gvisor: filepath.Join(cfg.DataDir, "gvisor"+suffix)}
	return inst, func() {
		for _, d := range []string{inst.bwrapPins, inst.dockerPins, inst.gvisor + "/pins"} {
			_ = sandbox.CleanPins(d)
			_ = os.Remove(d)
		}
		_ = os.RemoveAll(inst.gvisor)
	}
}

// telegramFinding asks the Bot API who the bot is, as serve does first.
func telegramFinding(ctx context.Context, cfg config.Config) Finding {
	f := Finding{Name: "telegram"}
	if cfg.TelegramToken == "" {
		f.Verdict, f.Detail = Fail, "TELEGRAM_BOT_TOKEN is not set"
		f.Fix = "create a bot with @BotFather and put TELEGRAM_BOT_TOKEN=<token> in .env (copy configs/.env.example)"
		return f
	}
	tg, err := telegram.New(ctx, telegram.Config{Token: cfg.TelegramToken, APIURL: cfg.TelegramAPIURL, Logger: slog.New(slog.DiscardHandler)})
	checkURL := "check TELEGRAM_API_URL (default " + config.DefaultTelegramAPIURL + ") and that this machine reaches it"
	var unreachable *url.Error
	switch {
	case errors.Is(err, telegram.ErrTokenRefused):
		f.Verdict, f.Detail = Fail, fmt.Sprintf("the token is refused by Telegram (getMe at %s: %v)", cfg.TelegramAPIURL, err)
		f.Fix = "check TELEGRAM_BOT_TOKEN in .env: the token exactly as @BotFather gives it (/mybots, API Token)"
	case errors.As(err, &unreachable):
		f.Verdict, f.Detail, f.Fix = Fail, fmt.Sprintf("the Bot API at %s is not reachable: %v", cfg.TelegramAPIURL, err), checkURL
	case err != nil:
		f.Verdict, f.Detail, f.Fix = Fail, fmt.Sprintf("the Bot API at %s does not answer getMe: %v", cfg.TelegramAPIURL, err), checkURL
	default:
		f.Verdict, f.Detail = OK, fmt.Sprintf("token accepted: bot @%s (id %d) at %s", tg.Username(), tg.BotID(), cfg.TelegramAPIURL)
	}
	return f
}

// providerFinding makes one cheap authenticated request to the provider the
// agents use, the list of its models: the URL answers, the key is
// accepted, and the model is among those listed.
func providerFinding(ctx context.Context, cfg config.Config, hc *http.Client) Finding {
	f := Finding{Name: "provider"}
	var base, urlVar, keyVar, key, models string
	switch {
	case cfg.AnthropicKey != "":
		base, urlVar, keyVar, key = cfg.AnthropicBaseURL, "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", cfg.AnthropicKey
		models = base + "/v1/models?limit=1000"
	case cfg.Provider() == "openai":
		base, urlVar, keyVar, key = cfg.OpenAIBaseURL, "OPENAI_BASE_URL", "OPENAI_API_KEY", cfg.OpenAIKey
		models = base + "/models"
	default:
		f.Verdict, f.Detail = Fail, "no model key"
		f.Fix = "put ANTHROPIC_API_KEY=<key> (or OPENAI_API_KEY, and OPENAI_BASE_URL for another OpenAI-compatible server) in .env"
		return f
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, models, nil)
	if err != nil {
		f.Verdict, f.Detail, f.Fix = Fail, fmt.Sprintf("%s=%q: %v", urlVar, base, err), "set "+urlVar+" to the provider's base URL"
		return f
	}
	switch {
	case cfg.AnthropicKey != "":
		req.Header.Set("X-Api-Key", key)
		req.Header.Set("Anthropic-Version", hostsock.DefaultAnthropicVer)
	case key != "":
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := hc.Do(req)
	if err != nil {
		f.Verdict, f.Detail = Fail, fmt.Sprintf("the provider at %s is not reachable: %v", base, err)
		f.Fix = "check " + urlVar + " and that this machine reaches it"
		return f
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		f.Verdict, f.Detail = Fail, fmt.Sprintf("the provider at %s: reading its answer: %v", base, err)
		f.Fix = "check " + urlVar + " and that this machine reaches it"
		return f
	}
	said := providerSays(resp.StatusCode, body)
	switch {
	case resp.StatusCode == http.StatusOK:
		return modelFinding(f, cfg.Model, base, body)
	case (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden) && key == "":
		f.Verdict, f.Detail = Fail, fmt.Sprintf("the server at %s wants a key (%s)", base, said)
		f.Fix = "put the server's key in .env as OPENAI_API_KEY"
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		f.Verdict, f.Detail = Fail, fmt.Sprintf("the key is refused by the provider at %s (%s)", base, said)
		f.Fix = "check " + keyVar + " in .env"
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		// The provider is there and did not refuse the key; it is busy.
		f.Verdict, f.Detail = Warn, fmt.Sprintf("the provider at %s is reachable but busy (%s)", base, said)
		f.Fix = "try doctor again later"
	default:
		f.Verdict, f.Detail = Fail, fmt.Sprintf("the provider at %s does not list models (%s)", base, said)
		f.Fix = "check " + urlVar + ": the provider's base URL"
	}
	return f
}

// providerSays is an error answer in a few words: the status and the
// provider's own message (both APIs nest it as error.type, error.message).
func providerSays(status int, body []byte) string {
	var e struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	said := strconv.Itoa(status) + " " + http.StatusText(status)
	if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
		said = strconv.Itoa(status) + " " + strings.TrimSpace(e.Error.Type+": "+e.Error.Message)
	}
	return said
}

// modelFinding reads the provider's list of models: the configured model
// should be among them, by its id or as an alias of a dated id
// (claude-sonnet-4-5 for claude-sonnet-4-5-20250929; llama3 for llama3:latest).
func modelFinding(f Finding, model, base string, body []byte) Finding {
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		f.Verdict, f.Detail = Warn, fmt.Sprintf("key accepted by %s, but its list of models is unreadable: %v", base, err)
		return f
	}
	var ids []string
	for _, m := range list.Data {
		if m.ID == model || strings.HasPrefix(m.ID, model+"-") || strings.HasPrefix(m.ID, model+":") {
			f.Verdict, f.Detail = OK, fmt.Sprintf("key accepted by %s; model %s listed", base, model)
			return f
		}
		ids = append(ids, m.ID)
	}
	f.Verdict = Warn
	f.Detail = fmt.Sprintf("key accepted by %s, but the model %s is not among the %d it lists", base, model, len(ids))
	f.Fix = "set CLAWPEN_MODEL to one of them"
	if len(ids) > 0 {
		f.Fix += ", e.g. " + strings.Join(ids[:min(5, len(ids))], ", ")
	}
	return f
}

// dataFindings prepares the data dir and opens the database as serve does
// (migrating it), and says which database it is, its schema version and,
// for PostgreSQL, which host serves it now (the holder of its serving
// lock: serve waits while another host holds it).
func dataFindings(ctx context.Context, cfg config.Config) []Finding {
	data := Finding{Name: "data", Verdict: OK, Detail: cfg.DataDir + " private to the host (0700)"}
	if err := prepareDataDir(cfg.DataDir); err != nil {
		data.Verdict, data.Detail = Fail, err.Error()
		data.Fix = "make " + cfg.DataDir + " writable by the host user, or set CLAWPEN_DATA_DIR to a directory that is"
		return []Finding{data}
	}
	db := Finding{Name: "database", Verdict: Fail}
	st, err := OpenStore(ctx, cfg)
	if err != nil {
		db.Detail = err.Error()
		db.Fix = "make " + cfg.DataDir + " writable by the host user, or set CLAWPEN_DATA_DIR to a directory that is"
		if cfg.DatabaseURL != "" {
			db.Fix = "check CLAWPEN_DATABASE_URL: the server answers from here, the database exists, and its user may create tables in it"
		}
		return []Finding{data, db}
	}
	defer st.Close()
	v, err := st.SchemaVersion(ctx)
	if err != nil {
		db.Detail = st.Where() + ": " + err.Error()
		return []Finding{data, db}
	}
	db.Verdict, db.Detail = OK, fmt.Sprintf("%s opens; schema version %d", st.Where(), v)
	if cfg.DatabaseURL != "" {
		holder, err := st.LeadHolder(ctx)
		switch {
		case err != nil:
			db.Verdict, db.Detail = Warn, db.Detail+"; who serves it is unknown: "+err.Error()
		case holder == "":
			db.Detail += "; no host serves it now"
		default:
			db.Detail += "; served now by " + holder + " (a serve started here stands by until it stops)"
		}
	}
	return []Finding{data, db}
}

// socketFinding makes a host socket where runs make theirs, owned by the
// user sandboxes run as.
func socketFinding(cfg config.Config, uid, gid int) Finding {
	f := Finding{Name: "socket"}
	dir := runner.SocketsDir(cfg.DataDir)
	if err := runner.CheckSocket(cfg.DataDir, uid, gid); err != nil {
		f.Verdict, f.Detail = Fail, "agents' host sockets cannot be made in "+dir+": "+err.Error()
		f.Fix = "keep CLAWPEN_DATA_DIR on a local filesystem (not every network or FUSE filesystem holds unix sockets), with /proc mounted"
		return f
	}
	f.Verdict, f.Detail = OK, "agents' host sockets can be made in "+dir
	return f
}

// bwrapFindings makes the bwrap backend as serve does and reports what it
// found: whether namespaces, the seccomp filter and keyrings work.
func bwrapFindings(ctx context.Context, cfg config.Config, inst instance, uid, gid int, userErr, binErr error) ([]Finding, bool) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		return []Finding{{Name: "bwrap", Verdict: Fail, Detail: "bubblewrap is not installed", Fix: "apt-get install -y bubblewrap"}}, false
	}
	if binErr != nil {
		return []Finding{{Name: "bwrap", Verdict: Warn, Detail: "installed; not tried, since clawpen-agent is missing", Fix: "fix the agent finding above"}}, false
	}
	if userErr != nil {
		return []Finding{{Name: "bwrap", Verdict: Fail, Detail: "installed; not tried, since there is no usable sandbox user to run it as",
			Fix: "fix the user finding above"}}, false
	}
	// What the backend would log, doctor reports as findings.
	b, err := bwrapBackend(ctx, cfg, inst, uid, gid, slog.New(slog.DiscardHandler))
	if err != nil {
		if _, ok := errors.AsType[*bwrap.CgroupError](err); ok {
			return []Finding{{Name: "bwrap", Verdict: Fail, Detail: err.Error(), Fix: "fix the cgroup finding above"}}, false
		}
		if errors.Is(err, bwrap.ErrSeccomp) {
			return []Finding{
				{Name: "bwrap", Verdict: Fail, Detail: "namespaces work, but sandboxes would run without their seccomp filter", Fix: "see the seccomp finding"},
				{Name: "seccomp", Verdict: Fail, Detail: err.Error(), Fix: "use a kernel with seccomp filters (CONFIG_SECCOMP_FILTER) and bubblewrap 0.3 or later"},
			}, false
		}
		return []Finding{{Name: "bwrap", Verdict: Fail, Detail: err.Error(), Fix: fixOf(err)}}, false
	}
	defer b.Close()
	who := "the host user"
	if uid >= 0 {
		who = fmt.Sprintf("%s (uid %d)", cfg.SandboxUser, uid)
	}
	fs := []Finding{
		{Name: "bwrap", Verdict: OK, Detail: "namespaces work; sandboxes run as " + who},
		{Name: "seccomp", Verdict: OK, Detail: fmt.Sprintf("filter built (%d BPF instructions) and in force in a trial sandbox: "+
			"no keyrings, new user namespaces, ptrace, bpf, perf, io_uring, mounts or 32-bit system calls", b.FilterSize())},
	}
	if err := b.CheckKeyring(); err != nil {
		fs = append(fs, Finding{Name: "keyring", Verdict: Warn,
			Detail: "sandboxes cannot be given a session keyring of their own (" + err.Error() +
				"); they inherit the host's, which their seccomp filter keeps them from using and /proc/keys hides",
			Fix: "allow keyctl to the host (a host in a container: a seccomp profile that allows keyctl)"})
	} else {
		fs = append(fs, Finding{Name: "keyring", Verdict: OK, Detail: "each sandbox starts in a new anonymous session keyring, not the host's"})
	}
	return fs, true
}

// dockerFinding makes the Docker backend as serve does (engine, image,
// idmapped pins) and reports whether it would work.
func dockerFinding(ctx context.Context, cfg config.Config, inst instance, uid, gid int, userErr error) (Finding, bool) {
	f := Finding{Name: "docker"}
	root := os.Geteuid() == 0
	if root && userErr != nil {
		f.Verdict, f.Detail, f.Fix = dockerVerdict(cfg), "not tried: no usable sandbox user to write as", "fix the user finding above"
		return f, false
	}
	d, err := dockerBackend(ctx, cfg, inst, uid, gid, slog.New(slog.DiscardHandler))
	if err != nil {
		f.Verdict, f.Detail, f.Fix = dockerVerdict(cfg), err.Error(), fixOf(err)
		return f, false
	}
	_ = d.Close()
	detail := "engine answers; image " + cfg.AgentImage + " present"
	switch {
	case root:
		f.Verdict, f.Detail = OK, detail+"; binds are idmapped: containers write as "+cfg.SandboxUser
	case cfg.HostRoot != "":
		f.Verdict = Warn
		f.Detail = detail + "; this host runs in a container, so sandboxes write as uid 1000 on the Docker host (idmapped binds need root there)"
		f.Fix = "make sure uid 1000 on the Docker host is not a person's login account (docs/host-container.md)"
	default:
		f.Verdict, f.Detail = OK, detail+"; containers write as the host's own user (uid 1000)"
	}
	return f, true
}

// dockerVerdict: a Docker problem fails doctor only when Docker is required.
func dockerVerdict(cfg config.Config) Verdict {
	if cfg.Sandbox == "docker" {
		return Fail
	}
	return Warn
}

// backendFinding says which backend serve picks, by Backend's rule.
func backendFinding(mode string, bwrapOK, dockerOK bool) Finding {
	f := Finding{Name: "sandbox", Verdict: OK}
	switch {
	case mode == "docker" && dockerOK, mode == "auto" && dockerOK:
		f.Detail = "serve runs agents in Docker containers (CLAWPEN_SANDBOX=" + mode + ")"
	case mode == "bwrap" && bwrapOK, mode == "auto" && bwrapOK:
		f.Detail = "serve runs agents under bubblewrap (CLAWPEN_SANDBOX=" + mode + ")"
	case mode == "docker":
		f.Verdict, f.Detail, f.Fix = Fail, "CLAWPEN_SANDBOX=docker but Docker sandboxes do not work here", "fix the docker finding above, or set CLAWPEN_SANDBOX=auto"
	case mode == "bwrap":
		f.Verdict, f.Detail, f.Fix = Fail, "CLAWPEN_SANDBOX=bwrap but bubblewrap does not work here", "fix the bwrap finding above"
	case mode == "gvisor" && bwrapOK: // bwrapOK is gVisor's verdict here
		f.Detail = "serve runs agents under gVisor (CLAWPEN_SANDBOX=gvisor)"
	case mode == "gvisor":
		f.Verdict, f.Detail, f.Fix = Fail, "CLAWPEN_SANDBOX=gvisor but gVisor sandboxes do not work here", "fix the gvisor finding above"
	default:
		f.Verdict, f.Detail, f.Fix = Fail, "no working sandbox backend: agents will not run", "fix the findings above (agent, bwrap, docker)"
	}
	return f
}

// sandboxUserFinding says who sandboxes run and write as.
func sandboxUserFinding(cfg config.Config, uid, gid int, err error) Finding {
	f := Finding{Name: "user"}
	switch {
	case errors.Is(err, ErrNoSandboxUser):
		f.Verdict, f.Detail = Fail, err.Error()+"; agents will not run"
		f.Fix = CreateUserCommand(cfg.SandboxUser)
		if cfg.SandboxUser == config.DefaultSandboxUser {
			f.Fix += "   (or `make run`, which creates it)"
		}
	case err != nil:
		f.Verdict, f.Detail = Fail, err.Error()+"; agents will not run"
		f.Fix = "use a dedicated user: " + CreateUserCommand(config.DefaultSandboxUser) + ", and leave CLAWPEN_SANDBOX_USER unset"
	case uid >= 0:
		f.Verdict, f.Detail = OK, fmt.Sprintf("sandboxes run and write as %s (uid %d, gid %d), a dedicated user without login", cfg.SandboxUser, uid, gid)
	default:
		f.Verdict = OK
		f.Detail = fmt.Sprintf("the host is not root, so sandboxes run and write as the host's own user (uid %d)", os.Geteuid())
		if shell, ok := loginShellOf(os.Geteuid()); ok {
			f.Verdict = Warn
			f.Detail += fmt.Sprintf(", a login account (shell %s): what agents write belongs to it", shell)
			f.Fix = "run the host as root, which runs sandboxes as the dedicated user " + cfg.SandboxUser + ", or as a user without login"
		}
	}
	return f
}

// loginShellOf is uid's shell from /etc/passwd when it allows logins.
func loginShellOf(uid int) (string, bool) {
	for _, f := range colonFile("/etc/passwd", 7) {
		if f[2] == strconv.Itoa(uid) {
			return f[6], !noLogin(f[6])
		}
	}
	return "", false
}

func allowlistFinding(cfg config.Config, log *slog.Logger) Finding {
	f := Finding{Name: "allowlist"}
	p := MountPolicy(cfg, log)
	_, err := p.Current()
	switch {
	case errors.Is(err, mounts.ErrNoAllowlist):
		f.Verdict, f.Detail = OK, fmt.Sprintf("%s absent: no extra mounts", cfg.MountAllowlist)
	case err != nil:
		f.Verdict, f.Detail = Fail, err.Error()+"; no extra mounts are granted"
		f.Fix = "fix the file (see configs/mount-allowlist.example.json)"
	default:
		f.Verdict, f.Detail = OK, p.Status()
	}
	return f
}

// cgroupFinding says how sandbox cgroups are made here (v2 delegated, v1)
// or, when they cannot be, why and how to fix it: bwrap refuses to run
// without them.
func cgroupFinding(cfg config.Config) Finding {
	f := Finding{Name: "cgroup"}
	m, err := bwrap.OpenCgroups(bwrap.CgroupConfig{})
	if err != nil {
		f.Verdict, f.Detail = Warn, "none: bwrap sandboxes will not run: "+err.Error()
		if cfg.Sandbox == "bwrap" {
			f.Verdict = Fail
		}
		if ce, ok := errors.AsType[*bwrap.CgroupError](err); ok {
			f.Detail = "none: bwrap sandboxes will not run: " + ce.Reason
			if ce.Err != nil {
				f.Detail += ": " + ce.Err.Error()
			}
			f.Fix = ce.Fix
		}
		if f.Fix == "" {
			f.Fix = "run clawpen as root, or in a cgroup delegated to it (systemd Delegate=yes), or use the Docker sandbox"
		}
		return f
	}
	f.Verdict, f.Detail = OK, m.Describe()
	if err := m.Close(); err != nil {
		f.Verdict, f.Detail, f.Fix = Warn, "made a trial cgroup but could not remove it: "+err.Error(), "remove it by hand (rmdir)"
	}
	return f
}

// toolsFinding says, where bridge tools are defined, whether a call can be
// contained here: each runs in a cgroup scope of its own, and a host where
// none can be made refuses every call.
func toolsFinding(cfg config.Config) (Finding, bool) {
	n := len(tools.NewDir(cfg.ToolsDir).Load().Tools)
	if n == 0 {
		return Finding{}, false
	}
	f := Finding{Name: "tools"}
	s, err := cgroup.NewScope("clawpen-doctor")
	if err != nil {
		f.Verdict, f.Detail = Warn, fmt.Sprintf("%d bridge tools, but every call will be refused: %v", n, err) // the error names the fix
		return f, true
	}
	f.Verdict, f.Detail = OK, fmt.Sprintf("%d bridge tools; each call in a cgroup of its own under %s", n, filepath.Dir(s.Dir()))
	if err := s.Close(); err != nil {
		f.Verdict, f.Detail, f.Fix = Warn, "made a trial cgroup but could not remove it: "+err.Error(), "remove it by hand (rmdir)"
	}
	return f, true
}
