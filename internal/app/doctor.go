package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"

	"github.com/clawpen/clawpen/internal/config"
	"github.com/clawpen/clawpen/internal/doctor"
	"github.com/clawpen/clawpen/internal/mounts"
	"github.com/clawpen/clawpen/internal/sandbox/bwrap"
	"github.com/clawpen/clawpen/internal/sandbox/docker"
)

// Doctor checks everything `clawpen serve` needs and how to fix what is missing.
func Doctor(ctx context.Context, cfg config.Config, log *slog.Logger) []doctor.Finding {
	var fs []doctor.Finding
	add := func(name string, st doctor.Status, detail, fix string) {
		fs = append(fs, doctor.Finding{Name: name, Status: st, Detail: detail, Fix: fix})
	}

	switch {
	case cfg.TelegramToken == "":
		add("token", doctor.Fail, "TELEGRAM_BOT_TOKEN is not set", "create a bot with @BotFather and put TELEGRAM_BOT_TOKEN=<token> in .env (copy configs/.env.example)")
	case !validToken(cfg.TelegramToken):
		add("token", doctor.Fail, "TELEGRAM_BOT_TOKEN is malformed", "use the token exactly as @BotFather prints it: <digits>:<secret>")
	default:
		add("token", doctor.OK, "TELEGRAM_BOT_TOKEN set; Bot API at "+cfg.TelegramAPIURL, "")
	}
	switch {
	case cfg.AnthropicKey != "":
		add("key", doctor.OK, "ANTHROPIC_API_KEY set; provider "+cfg.AnthropicBaseURL+", model "+cfg.Model, "")
	case cfg.OpenAIKey != "":
		add("key", doctor.OK, "OPENAI_API_KEY set; provider "+cfg.OpenAIBaseURL+", model "+cfg.Model, "")
	default:
		add("key", doctor.Fail, "no model key", "put ANTHROPIC_API_KEY=<key> (or OPENAI_API_KEY and OPENAI_BASE_URL) in .env")
	}

	uid, gid, err := SandboxUser(cfg.GroupsDir)
	if err != nil {
		add("groups", doctor.Fail, err.Error(), "create the groups dir and make it writable by the host user")
	}
	bin, binErr := AgentBin(cfg)
	if binErr != nil {
		add("agent", doctor.Fail, binErr.Error(), "run `make build` (builds bin/clawpen and bin/clawpen-agent)")
	} else {
		add("agent", doctor.OK, bin, "")
	}

	bwrapOK := false
	if _, err := exec.LookPath("bwrap"); err != nil {
		add("bwrap", doctor.Fail, "bubblewrap is not installed", "apt-get install -y bubblewrap")
	} else if binErr != nil {
		add("bwrap", doctor.Warn, "installed; not tried, since clawpen-agent is missing", "fix the agent finding above")
	} else {
		b, err := bwrap.New(bwrap.Config{AgentBin: bin, RunAsUID: uid, RunAsGID: gid, Logger: log})
		if err == nil {
			err = b.Check(ctx)
		}
		if err != nil {
			add("bwrap", doctor.Fail, err.Error(), "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, user.max_user_namespaces>0) or run inside a VM/container that permits them")
		} else {
			bwrapOK = true
			who := "the host user"
			if uid >= 0 {
				who = fmt.Sprintf("uid %d", uid)
			}
			add("bwrap", doctor.OK, "namespaces work; sandboxes run as "+who, "")
		}
	}

	// The same engine client and image check as serve uses.
	dockerOK := false
	d, err := docker.New(ctx, docker.Config{Image: cfg.AgentImage, Logger: slog.New(slog.DiscardHandler)})
	switch {
	case err != nil:
		add("docker", dockerStatus(cfg, false), "no Docker engine: "+err.Error(), "install Docker (apt-get install docker.io) and start it, or use bwrap")
	default:
		if err := d.Check(ctx); err != nil {
			add("docker", dockerStatus(cfg, false), err.Error(), "build the agent image: make image")
		} else {
			dockerOK = true
			add("docker", doctor.OK, "engine answers; image "+cfg.AgentImage+" present", "")
		}
		_ = d.Close()
	}
	switch {
	case cfg.Sandbox == "bwrap" && !bwrapOK:
		add("sandbox", doctor.Fail, "CLAWPEN_SANDBOX=bwrap but bubblewrap does not work here", "fix the bwrap finding above")
	case cfg.Sandbox == "auto" && !bwrapOK && !dockerOK:
		add("sandbox", doctor.Fail, "no working sandbox backend: agents will not run", "fix the findings above (agent, bwrap, docker)")
	}

	fs = append(fs, allowlistFinding(cfg, slog.New(slog.DiscardHandler)))
	for _, name := range cfg.PassEnv {
		if config.LooksSecret(name) {
			add("env", doctor.Warn, fmt.Sprintf("CLAWPEN_SANDBOX_ENV lists %s, which looks like a secret; it is NOT passed into sandboxes", name),
				"remove "+name+" from CLAWPEN_SANDBOX_ENV; credentials stay in the host")
		}
	}
	fs = append(fs, dataDir(cfg.DataDir))
	if err == nil {
		add("groups", doctor.OK, cfg.GroupsDir, "")
	}
	return fs
}

func validToken(t string) bool {
	return len(t) > 10 && t[0] >= '0' && t[0] <= '9' && strings.Contains(t, ":")
}

func dataDir(dir string) doctor.Finding {
	f := doctor.Finding{Name: "data"}
	fi, err := os.Stat(dir)
	if os.IsNotExist(err) {
		f.Status, f.Detail = doctor.OK, dir+" will be created on first start"
		return f
	}
	if err != nil {
		f.Status, f.Detail, f.Fix = doctor.Fail, err.Error(), "make the data dir readable by the host user"
		return f
	}
	if fi.Mode().Perm()&0o066 != 0 {
		f.Status, f.Detail, f.Fix = doctor.Fail, fmt.Sprintf("%s is readable or writable by others (%v)", dir, fi.Mode().Perm()), "chmod 0711 "+dir
		return f
	}
	db := DBPath(dir)
	if fi, err := os.Stat(db); err == nil && fi.Mode().Perm()&0o077 != 0 {
		f.Status, f.Detail, f.Fix = doctor.Fail, fmt.Sprintf("%s has mode %v", db, fi.Mode().Perm()), "chmod 0600 "+db
		return f
	}
	probe, err := os.CreateTemp(dir, ".doctor-*")
	if err != nil {
		f.Status, f.Detail, f.Fix = doctor.Fail, "data dir not writable: "+err.Error(), "chown the data dir to the host user"
		return f
	}
	probe.Close()
	os.Remove(probe.Name())
	f.Status, f.Detail = doctor.OK, dir+" private and writable"
	return f
}

func allowlistFinding(cfg config.Config, log *slog.Logger) doctor.Finding {
	f := doctor.Finding{Name: "allowlist"}
	p := NewMountPolicy(cfg, log)
	_, err := p.Current()
	switch {
	case errors.Is(err, mounts.ErrNoAllowlist):
		f.Status, f.Detail = doctor.OK, fmt.Sprintf("%s absent: no extra mounts", cfg.MountAllowlist)
	case err != nil:
		f.Status, f.Detail = doctor.Fail, err.Error()+"; no extra mounts are granted"
		f.Fix = "fix the file (see configs/mount-allowlist.example.json)"
	default:
		f.Status, f.Detail = doctor.OK, p.Status()
	}
	return f
}

// dockerStatus: a Docker problem fails doctor only when Docker is required.
func dockerStatus(cfg config.Config, ok bool) doctor.Status {
	switch {
	case ok:
		return doctor.OK
	case cfg.Sandbox == "docker":
		return doctor.Fail
	default:
		return doctor.Warn
	}
}
