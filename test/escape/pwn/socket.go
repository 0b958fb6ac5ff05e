package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The host socket's own attacks: holding the host's memory with many slow
// or large requests, and requests that ask the model proxy for more than it
// should pass on. Their verdicts are mostly the host's to draw (its memory,
// what the fake provider received); these print what they saw.

const hostSock = "/run/clawpen/host.sock"

func init() {
	checks["sock-hold"] = sockHold
	checks["sock-req"] = sockReq
	checks["sock-flood"] = sockFlood
}

// list is a repeatable string flag.
type list []string

func (l *list) String() string     { return strings.Join(*l, ", ") }
func (l *list) Set(s string) error { *l = append(*l, s); return nil }

// sockHold opens many connections at once, each sending a request whose
// headers and body come as the flags say, keeps them open for -hold, and
// reports how the host dealt with them.
//
//	-conns N         connections
//	-header-bytes B  padding headers (X-Pad-N lines) per request
//	-open-headers    never end the header block
//	-body B          the body's size (0: none)
//	-chunked         send the body chunked (no Content-Length)
//	-lie             declare -body in Content-Length but never send the last KiB
//	-drip            after the rest, send one byte a second
//	-hold D          how long to keep everything open
//	-max-read B      NAME=BREACH if the host read more than B bytes of one body before refusing it
func sockHold(args []string) {
	fs := flag.NewFlagSet("sock-hold", flag.ExitOnError)
	name := fs.String("name", "HOLD", "marker")
	conns := fs.Int("conns", 16, "connections")
	headerBytes := fs.Int("header-bytes", 0, "padding header bytes")
	openHeaders := fs.Bool("open-headers", false, "never end the headers")
	body := fs.Int64("body", 0, "body bytes")
	chunked := fs.Bool("chunked", false, "chunked body")
	lie := fs.Bool("lie", false, "hold back the last KiB of the body")
	drip := fs.Bool("drip", false, "drip a byte a second")
	hold := fs.Duration("hold", 8*time.Second, "hold time")
	maxRead := fs.Int64("max-read", 0, "most body bytes the host may read of one refused body")
	_ = fs.Parse(args)

	deadline := time.Now().Add(*hold)
	var (
		mu        sync.Mutex
		statuses  = map[string]int{}
		dialErrs  int
		written   atomic.Int64
		maxBody   int64 // most body bytes the host took on one connection before answering or closing
		wg        sync.WaitGroup
		pad       = strings.Repeat("p", 4000)
		chunk     = []byte(strings.Repeat("x", 64<<10))
		startGate = make(chan struct{})
	)
	for range *conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.DialTimeout("unix", hostSock, 3*time.Second)
			if err != nil {
				mu.Lock()
				dialErrs++
				mu.Unlock()
				return
			}
			defer c.Close()
			_ = c.SetDeadline(deadline)
			<-startGate
			// The answer, read while we write: a refusal may come early.
			answered := make(chan string, 1)
			go func() {
				line, err := bufio.NewReader(c).ReadString('\n')
				if err != nil {
					answered <- "closed (" + shortErr(err) + ")"
					return
				}
				answered <- strings.TrimSpace(line)
			}()
			// Written as it goes: the padding alone may be larger than this
			// process may hold for every connection at once.
			w := bufio.NewWriterSize(c, 64<<10)
			fmt.Fprintf(w, "POST /v1/messages HTTP/1.1\r\nHost: clawpen\r\nContent-Type: application/json\r\n")
			for n := 0; n < *headerBytes; n += len(pad) + 16 {
				fmt.Fprintf(w, "X-Pad-%d: %s\r\n", n, pad)
			}
			switch {
			case *body > 0 && *chunked:
				fmt.Fprintf(w, "Transfer-Encoding: chunked\r\n")
			case *body > 0:
				fmt.Fprintf(w, "Content-Length: %d\r\n", *body)
			}
			if !*openHeaders {
				fmt.Fprintf(w, "\r\n")
			}
			if err := w.Flush(); err != nil {
				record(&mu, statuses, "header write failed ("+shortErr(err)+")")
				return
			}
			sent := int64(0)
			goal := *body
			if *lie || *drip {
				goal -= 1 << 10
			}
			status := ""
		send:
			for sent < goal {
				select {
				case status = <-answered:
					break send
				default:
				}
				n := min(int64(len(chunk)), goal-sent)
				var err error
				if *chunked {
					_, err = fmt.Fprintf(c, "%x\r\n%s\r\n", n, chunk[:n])
				} else {
					_, err = c.Write(chunk[:n])
				}
				if err != nil {
					break
				}
				sent += n
				written.Add(n)
			}
			for status == "" && (*drip || *openHeaders) && time.Now().Before(deadline) {
				select {
				case status = <-answered:
				case <-time.After(time.Second):
					if _, err := c.Write([]byte("x")); err != nil {
						status = "closed while dripping (" + shortErr(err) + ")"
					}
				}
			}
			if status == "" {
				if *chunked && sent >= goal && !*drip && !*lie {
					_, _ = io.WriteString(c, "0\r\n\r\n")
				}
				select {
				case status = <-answered:
				case <-time.After(time.Until(deadline)):
					status = "no answer, still open"
				}
			}
			mu.Lock()
			statuses[status]++
			if strings.Contains(status, " 4") || strings.HasPrefix(status, "closed") {
				maxBody = max(maxBody, sent)
			}
			mu.Unlock()
		}()
	}
	close(startGate)
	wg.Wait()
	fmt.Printf("%s: %d connections, %d refused at connect, %d body bytes written; largest refused body taken: %d\n",
		*name, *conns, dialErrs, written.Load(), maxBody)
	keys := make([]string, 0, len(statuses))
	for k := range statuses {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Printf("%s:   %4d × %s\n", *name, statuses[k], k)
	}
	if *maxRead > 0 {
		if maxBody > *maxRead {
			fmt.Printf("%s=BREACH (the host read %d bytes of a body before refusing it)\n", *name, maxBody)
		} else {
			fmt.Printf("%s=HELD\n", *name)
		}
	}
	fmt.Printf("%s-DONE\n", *name)
}

func record(mu *sync.Mutex, m map[string]int, k string) {
	mu.Lock()
	m[k]++
	mu.Unlock()
}

func shortErr(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 {
		s = s[i+2:]
	}
	return s
}

// sockReq sends one request with chosen headers and trailers and prints the
// answer.
//
//	-path P      default /v1/messages
//	-H "K: V"    a header (repeatable)
//	-T "K: V"    a trailer after a chunked body (repeatable)
//	-declare     announce the trailers in a Trailer header
//	-body JSON
func sockReq(args []string) {
	fs := flag.NewFlagSet("sock-req", flag.ExitOnError)
	name := fs.String("name", "REQ", "marker")
	path := fs.String("path", "/v1/messages", "path")
	body := fs.String("body", "", "body")
	declare := fs.Bool("declare", false, "declare the trailers")
	var headers, trailers list
	fs.Var(&headers, "H", "header")
	fs.Var(&trailers, "T", "trailer")
	_ = fs.Parse(args)

	c, err := net.DialTimeout("unix", hostSock, 3*time.Second)
	if err != nil {
		fmt.Printf("%s: dial: %v\n", *name, err)
		return
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: clawpen\r\nContent-Type: application/json\r\nConnection: close\r\n", *path)
	for _, h := range headers {
		b.WriteString(h + "\r\n")
	}
	if len(trailers) == 0 {
		fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n%s", len(*body), *body)
	} else {
		b.WriteString("Transfer-Encoding: chunked\r\n")
		if *declare {
			var names []string
			for _, t := range trailers {
				names = append(names, strings.TrimSpace(strings.SplitN(t, ":", 2)[0]))
			}
			b.WriteString("Trailer: " + strings.Join(names, ", ") + "\r\n")
		}
		fmt.Fprintf(&b, "\r\n%x\r\n%s\r\n0\r\n", len(*body), *body)
		for _, t := range trailers {
			b.WriteString(t + "\r\n")
		}
		b.WriteString("\r\n")
	}
	if _, err := io.WriteString(c, b.String()); err != nil {
		fmt.Printf("%s: write: %v\n", *name, err)
		return
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		fmt.Printf("%s: read: %v\n", *name, err)
		return
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(io.LimitReader(resp.Body, 600))
	fmt.Printf("%s -> HTTP %d %s\n", *name, resp.StatusCode, strings.TrimSpace(string(out)))
}

// sockFlood sends -n small model requests over -c keep-alive connections as
// fast as the host answers, and counts the answers.
func sockFlood(args []string) {
	fs := flag.NewFlagSet("sock-flood", flag.ExitOnError)
	name := fs.String("name", "FLOOD", "marker")
	n := fs.Int("n", 300, "requests")
	conc := fs.Int("c", 4, "connections")
	body := fs.String("body", "", "body")
	path := fs.String("path", "/v1/messages", "path")
	timeout := fs.Duration("timeout", 10*time.Second, "each request's time limit")
	_ = fs.Parse(args)

	hc := &http.Client{Timeout: *timeout, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", hostSock)
		},
		MaxIdleConnsPerHost: *conc,
	}}
	var (
		mu     sync.Mutex
		counts = map[int]int{}
		next   atomic.Int64
		wg     sync.WaitGroup
	)
	start := time.Now()
	for range *conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(*n) {
				status := 0
				resp, err := hc.Post("http://clawpen"+*path, "application/json", strings.NewReader(*body))
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
					status = resp.StatusCode
				}
				mu.Lock()
				counts[status]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	fmt.Printf("%s: %d requests in %.1fs: %v\n", *name, *n, time.Since(start).Seconds(), counts)
	if counts[http.StatusOK] == *n {
		fmt.Printf("%s=BREACH (every request was passed on)\n", *name)
	} else {
		fmt.Printf("%s=HELD (%d passed on)\n", *name, counts[http.StatusOK])
	}
}
