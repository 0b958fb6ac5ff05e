package tools

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/clawpen/clawpen/internal/cgroup"
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
	// Numbers are rewritten before they are checked, so that the value the
	// schema checks is the text argv gets (and the validator never expands
	// a huge exponent).
	if _, err := canonicalNumbers(obj); err != nil {
		return Call{}, fmt.Errorf("%w: %v", ErrArgs, err)
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
	// RFC 8785, except that numbers keep the form they are passed in:
	// its float64 form would give 2^63 and 2^63+1 one digest.
	if err := jv.Canonicalize(jsontext.CanonicalizeRawInts(false), jsontext.CanonicalizeRawFloats(false)); err != nil {
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

// text is a scalar argument as it goes into argv (numbers are already
// in decimal's form).
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

// canonicalNumbers returns v (decoded JSON) with every number in
// decimal's form; objects and arrays are rewritten in place.
func canonicalNumbers(v any) (any, error) {
	var err error
	switch x := v.(type) {
	case json.Number:
		return decimal(x)
	case map[string]any:
		for k, e := range x {
			if x[k], err = canonicalNumbers(e); err != nil {
				return nil, err
			}
		}
	case []any:
		for i, e := range x {
			if x[i], err = canonicalNumbers(e); err != nil {
				return nil, err
			}
		}
	}
	return v, nil
}

// maxNumberText bounds a number written out: a program is handed digits,
// never an exponent, so 1e400 would be 401 of them (and 1e999999999 a
// gigabyte). The schema's minimum and maximum are where a tool bounds its
// numbers; this only keeps the host's work small.
const maxNumberText = 100

var numberRe = regexp.MustCompile(`^(-?)([0-9]+)(?:\.([0-9]+))?(?:[eE]([+-]?)([0-9]+))?$`)

// decimal writes a JSON number in one form, exactly (it works on the
// digits, nothing is rounded): an integral value as an integer ("100e-1"
// is "10", "-0" is "0", "1.0" is "1"), any other as digits, a point and
// its fraction without trailing zeros ("2.50E-1" is "0.25"). A number
// longer than maxNumberText characters written so is refused.
func decimal(n json.Number) (json.Number, error) {
	m := numberRe.FindStringSubmatch(string(n))
	if m == nil {
		return "", fmt.Errorf("%.40q is not a JSON number", n)
	}
	neg, digits, exp := m[1] == "-", m[2]+m[3], -len(m[3])
	// value = digits × 10^exp
	if e := strings.TrimLeft(m[5], "0"); len(e) > 9 {
		exp = math.MaxInt32 // far past any bound below; zero is caught first
	} else if e != "" {
		k, _ := strconv.Atoi(e)
		if m[4] == "-" {
			k = -k
		}
		exp += k
	}
	digits = strings.TrimLeft(digits, "0")
	if digits == "" {
		return "0", nil
	}
	trimmed := strings.TrimRight(digits, "0")
	exp += len(digits) - len(trimmed)
	digits = trimmed
	var size int // of the written form, without its sign
	switch {
	case exp >= 0:
		size = len(digits) + exp
	case -exp < len(digits):
		size = len(digits) + 1
	default:
		size = 2 - exp // "0." and -exp fraction digits
	}
	if exp > maxNumberText || exp < -maxNumberText || size > maxNumberText {
		return "", fmt.Errorf("number %.40s has more than %d digits written out; bound it with the schema's minimum and maximum", n, maxNumberText)
	}
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	switch {
	case exp >= 0:
		b.WriteString(digits)
		b.WriteString(strings.Repeat("0", exp))
	case -exp < len(digits):
		b.WriteString(digits[:len(digits)+exp])
		b.WriteByte('.')
		b.WriteString(digits[len(digits)+exp:])
	default:
		b.WriteString("0.")
		b.WriteString(strings.Repeat("0", -exp-len(digits)))
		b.WriteString(digits)
	}
	return json.Number(b.String()), nil
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
// only, stdin is empty, the working directory is /, and the process is
// born in a cgroup of its own (cgroup.Scope) with everything it starts,
// however it detaches (setsid, a double fork): all of it is killed at the
// timeout and when the leader ends, and Run returns once it is gone.
// stdout and stderr are each kept up to MaxOutput bytes. An error is a
// command that could not be started, contained or cleared away; a host
// where no such cgroup can be made runs no tool (it could not keep that
// promise).
func (t *Tool) Run(ctx context.Context, c Call, getenv Getenv) (res Result, err error) {
	scope, err := cgroup.NewScope("clawpen-tool")
	if err != nil {
		return Result{}, fmt.Errorf("contain %s: %w", c.Argv[0], err)
	}
	defer func() {
		// What the leader left behind.
		if cerr := scope.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("clear away what %s left: %w", c.Argv[0], cerr)
		}
	}()
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
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, UseCgroupFD: true, CgroupFD: scope.FD()}
	cmd.Cancel = scope.Kill
	// A child that keeps the pipes open after the leader ended is killed
	// when the scope closes; this only bounds how long its output is
	// waited for.
	cmd.WaitDelay = 200 * time.Millisecond
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return Result{}, fmt.Errorf("start %s: %w", c.Argv[0], err)
	}
	err = cmd.Wait()
	res = Result{ExitCode: cmd.ProcessState.ExitCode(), Stdout: stdout.String(), Stderr: stderr.String(),
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
