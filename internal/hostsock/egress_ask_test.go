package hostsock

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
)

// scriptedOwner records what it is asked and answers with its verdict.
type scriptedOwner struct {
	mu      sync.Mutex
	asked   []string
	verdict error
}

func (o *scriptedOwner) ask(_ context.Context, host string, port int) (string, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.asked = append(o.asked, fmt.Sprintf("%s:%d", host, port))
	if o.verdict != nil {
		return "", o.verdict
	}
	return "the owner, once", nil
}

func (o *scriptedOwner) questions() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.asked...)
}

func (o *scriptedOwner) answer(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.verdict = err
}

// echoServer accepts on addr, counts connections and echoes one line.
func echoServer(t *testing.T, addr string) (string, *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err, "Linux answers all of 127/8")
	t.Cleanup(func() { ln.Close() })
	var n atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			go func() {
				defer c.Close()
				l, _ := bufio.NewReader(c).ReadString('\n')
				_, _ = c.Write([]byte("echo " + l))
			}()
		}
	}()
	return ln.Addr().String(), &n
}

// Under egress_ask a destination the list does not hold is put to the
// owner when the list could have admitted it — a public one, or the very
// address the list names literally, on another port — and the owner's
// word decides; forbidden addresses are refused outright, never asked;
// without egress_ask nothing is asked. No outside address is contacted:
// the public name is answered by a fake resolver and the owner denies it.
func TestEgressAsksTheOwner(t *testing.T) {
	listed, _ := echoServer(t, "127.0.0.2:0")
	other, otherHits := echoServer(t, "127.0.0.2:0")
	stranger, strangerHits := echoServer(t, "127.0.0.3:0")
	o := &scriptedOwner{}
	audit := &auditLog{}
	res := fakeResolver{"public.example": {"8.8.8.8"}, "private.example": {"10.0.0.1"}}
	s, _ := listen(t, Config{
		Profile:   domain.Profile{Name: "ask", Network: domain.NetworkAllowlist, Egress: []string{listed}, EgressAsk: true},
		AskEgress: o.ask, Audit: audit.add, Resolver: res,
	})

	c, r, status := connect(t, s, other)
	require.Equal(t, "HTTP/1.1 200 Connection established", status)
	_, err := c.Write([]byte("hi\n"))
	require.NoError(t, err)
	line, err := r.ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "echo hi\n", line)
	c.Close()
	assert.Equal(t, []string{other}, o.questions(), "the listed address's other port is asked")
	assert.Contains(t, audit.egressLines(), fmt.Sprintf(`allow CONNECT %s: allowed by "the owner, once", connected to %s`, other, other))

	o.answer(errors.New("the owner declined"))
	_, _, status = connect(t, s, other)
	assert.Equal(t, fmt.Sprintf("HTTP/1.1 403 denied: %s is not in this group's egress list, and the owner declined", other), status)
	assert.Equal(t, int32(1), otherHits.Load(), "a denial dials nothing")

	_, _, status = connect(t, s, "public.example:443")
	assert.Contains(t, status, "403 denied: public.example:443 is not in this group's egress list, and the owner declined")
	assert.Equal(t, []string{other, other, "public.example:443"}, o.questions())

	for target, why := range map[string]string{
		stranger:              "loopback address",
		"private.example:443": "resolves to 10.0.0.1, a private address",
		"169.254.169.254:80":  "link-local address",
	} {
		_, _, status = connect(t, s, target)
		assert.Contains(t, status, "403 denied:", target)
		assert.Contains(t, status, why, target)
	}
	assert.Len(t, o.questions(), 3, "forbidden addresses are never asked")
	assert.Zero(t, strangerHits.Load())

	// The list itself still decides what it holds, without asking.
	o.answer(nil)
	_, _, status = connect(t, s, listed)
	assert.Equal(t, "HTTP/1.1 200 Connection established", status)
	assert.Len(t, o.questions(), 3)

	off, _ := listen(t, Config{
		Profile:   domain.Profile{Name: "noask", Network: domain.NetworkAllowlist, Egress: []string{listed}},
		AskEgress: o.ask, Resolver: res,
	})
	_, _, status = connect(t, off, other)
	assert.Contains(t, status, "403 denied: "+other+" is not in this group's egress list")
	assert.Len(t, o.questions(), 3, "without egress_ask nobody is asked")
}
