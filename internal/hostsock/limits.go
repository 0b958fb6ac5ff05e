package hostsock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/clawpen/clawpen/internal/domain"
)

// Limits bound what the peer of one socket can make the host hold. Zero
// fields take the defaults. Whatever a sandbox sends, one socket holds at
// most MaxConns connections of MaxHeaderBytes headers each, and request
// bodies of MaxInFlightBytes in all (about three times that while a body is
// rebuilt: the bytes read, the decoded request, the encoded one). With
// the defaults that is about 16 × 68 KiB + 3 × 8 MiB ≈ 25 MiB a socket,
// times the number of sandboxes running at once (CLAWPEN_MAX_CONCURRENT).
// Answers add what their meters hold (usage.go), one for each connection
// and each of the MaxDrains answers read after their client left.
type Limits struct {
	MaxConns       int   // connections at once; more wait to be accepted
	MaxHeaderBytes int   // request line and headers of one request
	MaxModelBytes  int64 // one model request's body
	MaxIPCBytes    int64 // one /ipc/ request's body
	// MaxInFlightBytes caps the request bodies being read, rebuilt or sent
	// on, summed over the socket's connections. A body is counted from its
	// Content-Length (a chunked one as the largest allowed) before a byte of
	// it is read; one that does not fit is refused with 429 at once.
	MaxInFlightBytes int64
	HeaderTimeout    time.Duration // to read a request's headers
	BodyTimeout      time.Duration // to read a request's body
	IdleTimeout      time.Duration // a kept-alive connection without a request
	// RequestsPerSecond and RequestBurst are the token bucket of model
	// requests a socket, that is one run, may make.
	RequestsPerSecond float64
	RequestBurst      int
	// An answer whose client left before its end is still read, to learn
	// the usage the provider bills (usage.go): for DrainTimeout after the
	// client left and DrainBytes at most, MaxDrains of a socket at once.
	// It holds none of the socket's connections.
	DrainTimeout time.Duration
	DrainBytes   int64
	MaxDrains    int
}

// DefaultLimits are the limits of a socket whose Config leaves them zero.
var DefaultLimits = Limits{
	MaxConns:       16, // the agent needs one or two
	MaxHeaderBytes: 64 << 10,
	// Ten times a full 200k-token context as text; the Messages API
	// itself takes up to 32 MB, mostly for images and PDFs, which
	// clawpen-agent does not send.
	MaxModelBytes:     8 << 20,
	MaxIPCBytes:       64 << 10,
	MaxInFlightBytes:  8 << 20,
	HeaderTimeout:     10 * time.Second,
	BodyTimeout:       30 * time.Second,
	IdleTimeout:       2 * time.Minute,
	RequestsPerSecond: 1, // a model call takes seconds; an agent makes one at a time
	RequestBurst:      60,
	// An answer of DefaultMaxTokens streams in a few minutes and some 2 MB;
	// one cut off by these is charged its worst case (usage.go).
	DrainTimeout: 2 * time.Minute,
	DrainBytes:   8 << 20,
	MaxDrains:    16,
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	pick := func(v, def int64) int64 {
		if v > 0 {
			return v
		}
		return def
	}
	l.MaxConns = int(pick(int64(l.MaxConns), int64(d.MaxConns)))
	l.MaxHeaderBytes = int(pick(int64(l.MaxHeaderBytes), int64(d.MaxHeaderBytes)))
	l.MaxModelBytes = pick(l.MaxModelBytes, d.MaxModelBytes)
	l.MaxIPCBytes = pick(l.MaxIPCBytes, d.MaxIPCBytes)
	l.MaxInFlightBytes = pick(l.MaxInFlightBytes, d.MaxInFlightBytes)
	l.HeaderTimeout = time.Duration(pick(int64(l.HeaderTimeout), int64(d.HeaderTimeout)))
	l.BodyTimeout = time.Duration(pick(int64(l.BodyTimeout), int64(d.BodyTimeout)))
	l.IdleTimeout = time.Duration(pick(int64(l.IdleTimeout), int64(d.IdleTimeout)))
	if l.RequestsPerSecond <= 0 {
		l.RequestsPerSecond = d.RequestsPerSecond
	}
	l.RequestBurst = int(pick(int64(l.RequestBurst), int64(d.RequestBurst)))
	l.DrainTimeout = time.Duration(pick(int64(l.DrainTimeout), int64(d.DrainTimeout)))
	l.DrainBytes = pick(l.DrainBytes, d.DrainBytes)
	l.MaxDrains = int(pick(int64(l.MaxDrains), int64(d.MaxDrains)))
	return l
}

// reservation is a number of bytes counted against a socket's bytes in flight.
type reservation struct {
	sem *semaphore.Weighted
	mu  sync.Mutex
	n   int64
}

// resize makes the reservation n bytes; growing fails when they are not free.
func (r *reservation) resize(n int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case n < r.n:
		r.sem.Release(r.n - n)
	case n > r.n:
		if !r.sem.TryAcquire(n - r.n) {
			return false
		}
	}
	r.n = n
	return true
}

func (r *reservation) release() { r.resize(0) }

// readBody reads a request's body under the socket's limits: at most limit
// bytes, counted against the socket's bytes in flight until the reservation
// is released, within the body timeout. On failure it has answered the
// request and holds nothing.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, *reservation, bool) {
	if len(r.Header.Values("Trailer")) > 0 || len(r.Trailer) > 0 {
		s.refuse(w, r, http.StatusForbidden, "request trailers are not accepted")
		return nil, nil, false
	}
	if r.ContentLength > limit {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body larger than %d bytes", limit))
		return nil, nil, false
	}
	res := &reservation{sem: s.inFlight}
	size := r.ContentLength
	if size < 0 {
		size = limit // chunked: counted as the largest it may be while it comes
	}
	if !res.resize(size) {
		s.refuse(w, r, http.StatusTooManyRequests, fmt.Sprintf("more than %d bytes of requests in flight on this socket", s.lim.MaxInFlightBytes))
		return nil, nil, false
	}
	fail := func(status int, msg string) ([]byte, *reservation, bool) {
		res.release()
		writeError(w, status, msg)
		return nil, nil, false
	}

	rc := http.NewResponseController(w)
	if err := rc.SetReadDeadline(time.Now().Add(s.lim.BodyTimeout)); err != nil {
		s.log.Error("set body read deadline", "err", err)
		return fail(http.StatusInternalServerError, "cannot limit the body's read time")
	}
	var body []byte
	var err error
	if r.ContentLength >= 0 {
		body = make([]byte, r.ContentLength)
		_, err = io.ReadFull(r.Body, body)
	} else {
		// Read into the room already counted for it: growing a slice as it
		// comes would allocate several times its size on the way.
		body = make([]byte, 0, limit+1)
		var n int64
		n, err = io.Copy(sliceWriter{&body}, http.MaxBytesReader(w, r.Body, limit))
		body = body[:n]
	}
	if err != nil {
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			return fail(http.StatusRequestEntityTooLarge, fmt.Sprintf("body larger than %d bytes", limit))
		case errors.Is(err, os.ErrDeadlineExceeded):
			return fail(http.StatusRequestTimeout, fmt.Sprintf("body not received within %s", s.lim.BodyTimeout))
		default:
			return fail(http.StatusBadRequest, "cannot read request body")
		}
	}
	res.resize(int64(len(body))) // shrinking always succeeds
	// A streamed answer may last minutes: the deadline must not cut it (the
	// server's background read would cancel the request when it expires).
	if err := rc.SetReadDeadline(time.Time{}); err != nil {
		return fail(http.StatusInternalServerError, "cannot clear the body's read deadline")
	}
	if len(r.Trailer) > 0 { // undeclared trailers after a chunked body
		res.release()
		s.refuse(w, r, http.StatusForbidden, "request trailers are not accepted")
		return nil, nil, false
	}
	return body, res, true
}

// sliceWriter appends to a slice allocated with room for everything.
type sliceWriter struct{ b *[]byte }

func (w sliceWriter) Write(p []byte) (int, error) {
	*w.b = append(*w.b, p...)
	return len(p), nil
}

// releasingBody is a rebuilt request body that gives its bytes back to the
// socket's budget when the transport has sent and closed it (which it may
// do in another goroutine than the one reading).
type releasingBody struct {
	mu      sync.Mutex // guards r
	r       io.Reader
	release func()
}

func (b *releasingBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.r.Read(p)
}

func (b *releasingBody) Close() error {
	b.mu.Lock()
	b.r = eofReader{} // drops the bytes, which the release says are gone
	b.mu.Unlock()
	b.release()
	return nil
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

// refuse answers status with {"error": "denied: reason"} and records it.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, status int, reason string) {
	if status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", strconv.Itoa(int(1/s.lim.RequestsPerSecond)+1))
	}
	writeError(w, status, "denied: "+reason)
	s.refusals.note(operation(r.URL.Path), reason)
}

// operation names a socket path in the audit log.
func operation(path string) string {
	switch path {
	case "/v1/messages":
		return "proxy.messages"
	case "/v1/messages/count_tokens":
		return "proxy.count_tokens"
	case "/v1/chat/completions":
		return "proxy.chat_completions"
	}
	return "socket.ipc"
}

// maxAudited is how many refusals of one socket are each written to the
// audit log; the rest are counted and written as one entry when it closes,
// so that a sandbox cannot flood the log.
const maxAudited = 10

type refusals struct {
	s          *Server
	mu         sync.Mutex
	n          int
	suppressed int
}

func (f *refusals) note(op, reason string) {
	f.mu.Lock()
	f.n++
	first := f.n <= maxAudited
	if !first {
		f.suppressed++
	}
	f.mu.Unlock()
	if first {
		f.s.log.Warn("host socket refused a request", "operation", op, "reason", reason)
		f.s.audit(op, reason)
	}
}

// flush records how many refusals went unrecorded.
func (f *refusals) flush() {
	f.mu.Lock()
	n := f.suppressed
	f.suppressed = 0
	f.mu.Unlock()
	if n > 0 {
		reason := fmt.Sprintf("%d more refusals on this socket", n)
		f.s.log.Warn("host socket refused more requests", "count", n)
		f.s.audit("socket", reason)
	}
}

func (s *Server) audit(op, reason string) {
	if s.cfg.Audit == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.cfg.Audit(ctx, domain.AuditEntry{Time: time.Now(), Group: s.caller.Group, Operation: op, Decision: "deny", Reason: reason})
	if err != nil {
		s.log.Error("write audit log", "err", err)
	}
}
