package tools

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// ErrArgs is wrapped by every refusal of a call's arguments.
var ErrArgs = errors.New("invalid arguments")

// Call is a checked call: the argv to run and the digest of its arguments.
type Call struct {
	Argv []string
	// Digest is the SHA-256 of the arguments (defaults applied) as
	// canonical JSON (RFC 8785): what the audit log keeps instead of them.
	Digest string
}

// Prepare checks args (a JSON object) against the tool's schema, applies
// the defaults of its top-level properties, and fills the placeholders.
// A value is substituted as text into the one element that holds its
// placeholder, in one pass: it never becomes another element, is never
// given to a shell, and a "{name}" inside a value stays as it is.
func (t *Tool) Prepare(args []byte) (Call, error) {
	if len(bytes.TrimSpace(args)) == 0 {
		args = []byte("{}")
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return Call{}, fmt.Errorf("%w: not JSON: %v", ErrArgs, err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return Call{}, fmt.Errorf("%w: want a JSON object", ErrArgs)
	}
	for name, d := range t.defaults {
		if _, ok := obj[name]; !ok {
			obj[name] = d
		}
	}
	if err := t.schema.Validate(obj); err != nil {
		return Call{}, fmt.Errorf("%w: %s", ErrArgs, schemaError(err))
	}
	canon, err := json.Marshal(obj)
	if err != nil {
		return Call{}, fmt.Errorf("%w: %v", ErrArgs, err)
	}
	jv := jsontext.Value(canon)
	if err := jv.Canonicalize(); err != nil {
		return Call{}, fmt.Errorf("%w: %v", ErrArgs, err)
	}
	sum := sha256.Sum256(jv)
	argv := make([]string, len(t.Command))
	argv[0] = t.Command[0]
	for i, el := range t.Command[1:] {
		argv[i+1] = placeholderRe.ReplaceAllStringFunc(el, func(m string) string {
			return text(obj[m[1:len(m)-1]])
		})
	}
	return Call{Argv: argv, Digest: hex.EncodeToString(sum[:])}, nil
}

// text is a scalar argument as it goes into argv.
func text(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case json.Number:
		return x.String()
	case bool:
		return fmt.Sprint(x)
	}
	return fmt.Sprint(v) // not reached: Parse allows only scalar placeholders
}

// schemaError is the validator's message without its first line, which
// names the schema's internal URL.
func schemaError(err error) string {
	msg := err.Error()
	if _, rest, ok := strings.Cut(msg, "\n"); ok {
		msg = rest
	}
	return strings.ReplaceAll(strings.TrimSpace(strings.ReplaceAll(msg, "\n", "; ")), "- at ", "at ")
}

// Result is what a call answers (DESIGN.md: {"exit_code","stdout","stderr"}).
type Result struct {
	ExitCode  int           `json:"exit_code"`
	Stdout    string        `json:"stdout"`
	Stderr    string        `json:"stderr"`
	Truncated bool          `json:"truncated,omitempty"` // stdout or stderr was cut at max_output
	TimedOut  bool          `json:"timed_out,omitempty"` // killed at the timeout
	Duration  time.Duration `json:"-"`
}

// Getenv gives a tool's process the host's value of a variable.
type Getenv func(name string) string

// Run runs a prepared call: env holds PATH, HOME, LANG and the tool's env
// only, stdin is empty, the working directory is /, and the process leads
// a group of its own, all of which is killed at the timeout and when the
// leader ends (nothing it started outlives the call). stdout and stderr
// are each kept up to MaxOutput bytes. An error is a command that could
// not be started.
func (t *Tool) Run(ctx context.Context, c Call, getenv Getenv) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, t.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.Argv[0], c.Argv[1:]...)
	cmd.Dir = "/"
	cmd.Env = []string{}
	for _, name := range append([]string{"PATH", "HOME", "LANG"}, t.Env...) {
		if v := getenv(name); v != "" {
			cmd.Env = append(cmd.Env, name+"="+v)
		}
	}
	stdout, stderr := &capped{max: t.MaxOutput}, &capped{max: t.MaxOutput}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// A child that keeps the pipes open after the leader ended is killed
	// below; this only bounds how long its output is waited for.
	cmd.WaitDelay = 200 * time.Millisecond
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return Result{}, fmt.Errorf("start %s: %w", c.Argv[0], err)
	}
	err := cmd.Wait()
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // what the leader left behind
	res := Result{ExitCode: cmd.ProcessState.ExitCode(), Stdout: stdout.String(), Stderr: stderr.String(),
		Truncated: stdout.cut || stderr.cut, Duration: time.Since(start)}
	// Killed, not ended by itself, once the deadline had passed: a command
	// that exits just before it is not said to have timed out.
	res.TimedOut = errors.Is(ctx.Err(), context.DeadlineExceeded) && !cmd.ProcessState.Exited()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) && !errors.Is(err, exec.ErrWaitDelay) {
		return res, fmt.Errorf("wait for %s: %w", c.Argv[0], err)
	}
	return res, nil
}

// capped keeps the first max bytes written to it and notes what it cut.
type capped struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
	cut bool
}

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := c.max - c.buf.Len(); len(p) > room {
		c.buf.Write(p[:max(room, 0)])
		c.cut = true
	} else {
		c.buf.Write(p)
	}
	return len(p), nil
}

func (c *capped) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.ToValidUTF8(c.buf.String(), "\uFFFD")
}
