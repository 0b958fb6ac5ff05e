package runner

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/sandbox"
)

func TestEarlyResult(t *testing.T) {
	cases := []struct {
		name   string
		writes []string
		fires  bool
		want   string
	}{
		{"result after ready", []string{`{"type":"ready"}` + "\n", `{"type":"result","text":"hi"}` + "\n"}, true, "hi"},
		{"line split across writes", []string{`{"type":"res`, `ult","text":"split"}`, "\n"}, true, "split"},
		{"first result wins", []string{`{"type":"result","text":"a"}` + "\n" + `{"type":"result","text":"b"}` + "\n"}, true, "a"},
		{"garbage first: no early answer", []string{"rm -rf /\n", `{"type":"result","text":"x"}` + "\n"}, false, ""},
		{"error event first: no early answer", []string{`{"type":"error","error":"boom"}` + "\n", `{"type":"result","text":"x"}` + "\n"}, false, ""},
		{"no newline yet", []string{`{"type":"result","text":"x"}`}, false, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			e := newEarlyResult(context.Background(), func(_ context.Context, text string) error {
				got = append(got, text)
				return nil
			})
			for _, w := range c.writes {
				n, err := e.Write([]byte(w))
				require.NoError(t, err)
				require.Equal(t, len(w), n)
			}
			text, handled, err := e.wait()
			require.NoError(t, err)
			assert.Equal(t, c.fires, handled)
			if c.fires {
				assert.Equal(t, c.want, text)
				assert.Equal(t, []string{c.want}, got)
			} else {
				assert.Empty(t, got)
			}
		})
	}
}

// lingering writes a result, then keeps running until released: a sandbox
// whose teardown is slow.
type lingering struct {
	release chan struct{}
	exit    int
}

func (l lingering) Name() string { return "lingering" }

func (l lingering) Run(ctx context.Context, sp sandbox.Spec) (sandbox.Result, error) {
	if _, err := io.WriteString(sp.Stdout, `{"type":"ready"}`+"\n"+`{"type":"result","text":"early"}`+"\n"); err != nil {
		return sandbox.Result{}, err
	}
	select {
	case <-l.release:
		return sandbox.Result{ExitCode: l.exit}, nil
	case <-time.After(30 * time.Second):
		return sandbox.Result{}, errors.New("never released: the answer waited for the sandbox's end")
	}
}

func testRunner(t *testing.T, sb Sandbox) *Runner {
	dir := t.TempDir()
	return New(Config{GroupsDir: dir + "/groups", DataDir: dir + "/data", RunAsUID: -1, RunAsGID: -1}, sb)
}

// The answer is handed over while the sandbox is still running, and a bad
// end after that does not undo it.
func TestOnResultBeforeSandboxEnds(t *testing.T) {
	for _, exit := range []int{0, 137} {
		sb := lingering{release: make(chan struct{}), exit: exit}
		r := testRunner(t, sb)
		var got string
		ans, err := r.Run(context.Background(), Request{Group: domain.Group{Folder: "team", ChatID: -5},
			OnResult: func(_ context.Context, text string) error {
				got = text
				close(sb.release) // only now may the sandbox end
				return nil
			}})
		require.NoError(t, err, "exit %d", exit)
		assert.Equal(t, "early", got)
		assert.Equal(t, "early", ans.Text)
	}
}

// A failure to record the answer fails the run.
func TestOnResultErrorFailsRun(t *testing.T) {
	sb := lingering{release: make(chan struct{})}
	r := testRunner(t, sb)
	_, err := r.Run(context.Background(), Request{Group: domain.Group{Folder: "team", ChatID: -5},
		OnResult: func(context.Context, string) error {
			close(sb.release)
			return errors.New("disk full")
		}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "disk full")
}
