package docker

// The agent image (container/Dockerfile), built through the Docker Engine
// API, for `clawpen image build` and for tests.
//
// The build context is a tar made here of the needed files only (the
// Dockerfile and the static agent binary), so nothing else of the project —
// data/, .env — ever reaches the engine. The base image is local
// (clawpen-base:bookworm, made by container/make-base.sh with debootstrap) so
// that no registry is needed; BuildImage runs the script when the base is
// missing.

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// Defaults.
const (
	defaultImageTag  = "clawpen-agent:latest"
	defaultImageBase = "clawpen-base:bookworm"
	imageDockerfile  = "container/Dockerfile"
	makeBase         = "container/make-base.sh"
	// agentInContext is where container/Dockerfile expects the agent binary.
	agentInContext = "bin/clawpen-agent"
)

// ImageOptions configure BuildImage.
type ImageOptions struct {
	// ProjectRoot holds container/Dockerfile and container/make-base.sh.
	ProjectRoot string
	// AgentBin is the static clawpen-agent to put in the image; default
	// <ProjectRoot>/bin/clawpen-agent (what `make build` leaves there).
	AgentBin string
	// Tag of the result; default defaultImageTag.
	Tag string
	// Base image (the Dockerfile's BASE argument); default defaultImageBase, which
	// is made locally with make-base.sh when missing. Any other base (for example
	// debian:bookworm-slim) is left to the engine to find or pull.
	Base string
	// Client talks to the engine; nil: a client from the environment.
	Client *client.Client
	// Out receives the build's progress; nil discards it.
	Out io.Writer
}

// BuildImage builds the agent image: the local base first if it is missing, then
// container/Dockerfile with a context of the Dockerfile and the agent binary.
func BuildImage(ctx context.Context, opts ImageOptions) error {
	if opts.ProjectRoot == "" {
		opts.ProjectRoot = "."
	}
	if opts.AgentBin == "" {
		opts.AgentBin = filepath.Join(opts.ProjectRoot, agentInContext)
	}
	if opts.Tag == "" {
		opts.Tag = defaultImageTag
	}
	if opts.Base == "" {
		opts.Base = defaultImageBase
	}
	if opts.Out == nil {
		opts.Out = io.Discard
	}
	cli := opts.Client
	if cli == nil {
		c, err := client.New(client.FromEnv)
		if err != nil {
			return fmt.Errorf("docker client: %w", err)
		}
		defer c.Close()
		cli = c
	}

	dockerfile, err := os.ReadFile(filepath.Join(opts.ProjectRoot, imageDockerfile))
	if err != nil {
		return fmt.Errorf("read the agent image's Dockerfile (is %s the project root?): %w", opts.ProjectRoot, err)
	}
	agent, err := os.ReadFile(opts.AgentBin)
	if err != nil {
		return fmt.Errorf("read the agent binary (build it: make build): %w", err)
	}
	if err := CheckStatic(opts.AgentBin); err != nil {
		return err
	}

	if opts.Base == defaultImageBase {
		ok, err := imageExists(ctx, cli, opts.Base)
		if err != nil {
			return err
		}
		if !ok {
			fmt.Fprintf(opts.Out, "base image %s missing: building it with %s (debootstrap, a few minutes)\n", opts.Base, makeBase)
			if err := runMakeBase(ctx, opts.ProjectRoot, opts.Base, opts.Out); err != nil {
				return err
			}
		}
	}

	buildCtx, err := ContextTar([]ContextFile{
		{Name: imageDockerfile, Mode: 0o644, Body: dockerfile},
		{Name: agentInContext, Mode: 0o755, Body: agent},
	})
	if err != nil {
		return err
	}
	base := opts.Base
	_, err = BuildImageContext(ctx, cli, bytes.NewReader(buildCtx), client.ImageBuildOptions{
		Tags:        []string{opts.Tag},
		Dockerfile:  imageDockerfile,
		BuildArgs:   map[string]*string{"BASE": &base},
		Remove:      true,
		ForceRemove: true,
	}, opts.Out)
	if err != nil {
		return fmt.Errorf("build %s: %w", opts.Tag, err)
	}
	return nil
}

// runMakeBase runs container/make-base.sh, which needs root (debootstrap).
func runMakeBase(ctx context.Context, root, tag string, out io.Writer) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("base image %s is missing and making it needs root (debootstrap): run `sudo %s` once, or build with a registry base (--build-arg BASE=debian:bookworm-slim)",
			tag, filepath.Join(root, makeBase))
	}
	cmd := exec.CommandContext(ctx, "/bin/sh", filepath.Join(root, makeBase), tag)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("make base image %s with %s: %w", tag, makeBase, err)
	}
	return nil
}

// imageExists reports whether the engine has the image ref.
func imageExists(ctx context.Context, cli *client.Client, ref string) (bool, error) {
	_, err := cli.ImageInspect(ctx, ref)
	switch {
	case err == nil:
		return true, nil
	case cerrdefs.IsNotFound(err):
		return false, nil
	default:
		return false, fmt.Errorf("inspect image %s: %w", ref, err)
	}
}

// CheckStatic fails unless path is an ELF executable without a dynamic loader:
// the agent must run on any base, even FROM scratch.
func CheckStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("agent binary %s is not an ELF executable: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("agent binary %s is dynamically linked: build it with CGO_ENABLED=0", path)
		}
	}
	return nil
}

// File is one entry of a build context.
type ContextFile struct {
	Name string // slash-separated, relative
	Mode int64
	Body []byte
	Link string // a symlink to Link when set
	Dir  bool
}

// ContextTar makes a build context. Parent directories are added as needed; times are
// fixed so that the same files give the same context (and the build cache hits).
func ContextTar(files []ContextFile) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	dirs := map[string]bool{}
	var mkdirs func(string) error
	mkdirs = func(dir string) error {
		if dir == "." || dir == "" || dirs[dir] {
			return nil
		}
		if err := mkdirs(filepath.ToSlash(filepath.Dir(dir))); err != nil {
			return err
		}
		dirs[dir] = true
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir + "/", Mode: 0o755, ModTime: epoch, Format: tar.FormatPAX})
	}
	sorted := append([]ContextFile(nil), files...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	for _, f := range sorted {
		name := strings.TrimPrefix(filepath.ToSlash(filepath.Clean(f.Name)), "/")
		if name == "." || name == ".." || strings.HasPrefix(name, "../") {
			return nil, fmt.Errorf("build context entry %q escapes the context", f.Name)
		}
		if err := mkdirs(filepath.ToSlash(filepath.Dir(name))); err != nil {
			return nil, fmt.Errorf("build context: %w", err)
		}
		hdr := &tar.Header{Name: name, Mode: f.Mode, ModTime: epoch, Format: tar.FormatPAX}
		switch {
		case f.Dir:
			if dirs[name] {
				continue
			}
			dirs[name] = true
			hdr.Typeflag, hdr.Name = tar.TypeDir, name+"/"
		case f.Link != "":
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, f.Link
		default:
			hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(f.Body))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("build context %s: %w", name, err)
		}
		if hdr.Typeflag == tar.TypeReg {
			if _, err := tw.Write(f.Body); err != nil {
				return nil, fmt.Errorf("build context %s: %w", name, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("build context: %w", err)
	}
	return buf.Bytes(), nil
}

// buildMessage is one line of the engine's build progress stream.
type buildMessage struct {
	Stream string `json:"stream"`
	Status string `json:"status"`
	Error  string `json:"error"`
	Detail *struct {
		Message string `json:"message"`
	} `json:"errorDetail"`
	Aux *struct {
		ID string `json:"ID"`
	} `json:"aux"`
}

// BuildImageContext sends a tar build context to the engine, copies the progress to
// out, and returns the built image's id. A failed step is an error with the
// engine's message.
func BuildImageContext(ctx context.Context, cli *client.Client, buildCtx io.Reader, opts client.ImageBuildOptions, out io.Writer) (string, error) {
	if out == nil {
		out = io.Discard
	}
	res, err := cli.ImageBuild(ctx, buildCtx, opts)
	if err != nil {
		return "", fmt.Errorf("docker build: %w", err)
	}
	defer res.Body.Close()
	dec := json.NewDecoder(res.Body)
	var id string
	for {
		var m buildMessage
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return "", fmt.Errorf("read build progress: %w", err)
		}
		switch {
		case m.Error != "":
			return "", fmt.Errorf("docker build failed: %s", strings.TrimSpace(m.Error))
		case m.Detail != nil && m.Detail.Message != "":
			return "", fmt.Errorf("docker build failed: %s", strings.TrimSpace(m.Detail.Message))
		case m.Aux != nil && m.Aux.ID != "":
			id = m.Aux.ID
		case m.Stream != "":
			_, _ = io.WriteString(out, m.Stream)
		case m.Status != "":
			_, _ = io.WriteString(out, m.Status+"\n")
		}
	}
	if id == "" {
		return "", errors.New("docker build ended without an image id")
	}
	return id, nil
}
