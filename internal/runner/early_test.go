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
			iv := NewInvocation()
			e := &earlyResult{inv: iv}
			for _, w := range c.writes {
				n, err := e.Write([]byte(w))
				require.NoError(t, err)
				require.Equal(t, len(w), n)
			}
			text, handed := e.answer()
			assert.Equal(t, c.fires, handed)
			iv.Finish(Answer{}, errors.New("ended"))
			got, answered := <-iv.Answer()
			assert.Equal(t, c.fires, answered, "the invocation has the answer exactly when the output gave it")
			if c.fires {
				assert.Equal(t, c.want, text)
				assert.Equal(t, c.want, got)
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
func TestAnswerBeforeSandboxEnds(t *testing.T) {
	for _, exit := range []int{0, 137} {
		sb := lingering{release: make(chan struct{}), exit: exit}
		r := testRunner(t, sb)
		run := r.Start(context.Background(), Request{Group: domain.Group{Folder: "team", ChatID: -5}})
		got, ok := <-run.Answer()
		require.True(t, ok, "exit %d: an answer", exit)
		assert.Equal(t, "early", got)
		close(sb.release) // only now may the sandbox end
		ans, err := run.Wait()
		require.NoError(t, err, "exit %d", exit)
		assert.Equal(t, "early", ans.Text)
	}
}

// A run that ends without an answer closes Answer, and Wait says why.
func TestNoAnswerClosesAnswer(t *testing.T) {
	r := testRunner(t, planter{})
	run := r.Start(context.Background(), Request{Group: domain.Group{Folder: "team", ChatID: -5}})
	_, ok := <-run.Answer()
	assert.False(t, ok)
	_, err := run.Wait()
	assert.ErrorIs(t, err, ErrAgent)
}

// Progress lines reach the callback in order, up to the result and not
// past a malformed line.
func TestEarlyResultProgress(t *testing.T) {
	cases := []struct {
		name   string
		output string
		want   []string
	}{
		{"before the result", `{"type":"ready"}` + "\n" + `{"type":"progress","text":"He"}` + "\n" + `{"type":"progress","text":"Hello"}` + "\n" +
			`{"type":"result","text":"Hello!"}` + "\n" + `{"type":"progress","text":"late"}` + "\n", []string{"He", "Hello"}},
		{"not past garbage", `{"type":"progress","text":"a"}` + "\nnot json\n" + `{"type":"progress","text":"b"}` + "\n", []string{"a"}},
		{"a line split across writes", `{"type":"progress","text":"whole"}` + "\n", []string{"whole"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			e := &earlyResult{inv: NewInvocation(), progress: func(text string) { got = append(got, text) }}
			for i := 0; i < len(c.output); i += 7 { // in small writes, as a pipe may give them
				_, err := e.Write([]byte(c.output[i:min(i+7, len(c.output))]))
				require.NoError(t, err)
			}
			assert.Equal(t, c.want, got)
		})
	}
}
