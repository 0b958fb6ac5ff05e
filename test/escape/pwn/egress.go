package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The egress proxy's attacks: requests written by hand to the agent's relay
// on 127.0.0.1:3128 (so that no client library tidies them up first), each
// printing NAME=HELD when the proxy refused it and NAME=BREACH when it let
// it through.

const proxyAddr = "127.0.0.1:3128"

func init() {
	checks["proxy"] = proxyReq
	checks["proxy-smuggle"] = proxySmuggle
	checks["proxy-flood"] = proxyFlood
}

// proxyReq: pwn proxy NAME METHOD TARGET... sends "METHOD TARGET" for each
// TARGET (GET targets are host:port, sent as http://host:port/) and judges
// the status: a 2xx is a breach.
func proxyReq(args []string) {
	if len(args) < 3 {
		fmt.Println("usage: pwn proxy NAME METHOD TARGET...")
		return
	}
	name, method := args[0], args[1]
	for _, target := range args[2:] {
		label := name + "-" + target
		status, err := proxyStatus(method, target)
		if err != nil {
			verdict(label, err)
			continue
		}
		if strings.HasPrefix(status, "HTTP/1.1 2") || strings.HasPrefix(status, "HTTP/1.0 2") {
			fmt.Printf("%s=BREACH (%s)\n", label, status)
		} else {
			fmt.Printf("%s=HELD (%s)\n", label, status)
		}
	}
}

func proxyStatus(method, target string) (string, error) {
	c, err := net.DialTimeout("tcp", proxyAddr, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	uri := target
	if method != "CONNECT" {
		uri = "http://" + target + "/"
	}
	if _, err := fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", method, uri); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("no status line: %w", err)
	}
	return strings.TrimSpace(line), nil
}

// proxySmuggle: pwn proxy-smuggle TARGET UNLISTED CHAT opens an allowed
// tunnel to TARGET, whose server reads a line and closes; then writes, on
// the same connection, an absolute-form request for UNLISTED and an IPC
// call sending a message to CHAT. Anything that answers after the tunnel is
// a breach.
func proxySmuggle(args []string) {
	if len(args) < 3 {
		fmt.Println("usage: pwn proxy-smuggle TARGET UNLISTED CHAT")
		return
	}
	c, err := net.DialTimeout("tcp", proxyAddr, 5*time.Second)
	if err != nil {
		fmt.Printf("SMUGGLE-SETUP-FAILED (%v)\n", err)
		return
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	r := bufio.NewReader(c)
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: x\r\n\r\nline-through-the-tunnel\n", args[0])
	status, _ := r.ReadString('\n')
	fmt.Printf("SMUGGLE-TUNNEL: %s\n", strings.TrimSpace(status))
	for { // the rest of the 200's headers
		l, err := r.ReadString('\n')
		if err != nil || l == "\r\n" {
			break
		}
	}
	time.Sleep(time.Second) // the destination closes the tunnel
	body := fmt.Sprintf(`{"text":"SMUGGLED-VIA-TUNNEL","chat_id":%s}`, args[2])
	smuggled := "GET http://" + args[1] + "/ HTTP/1.1\r\nHost: x\r\n\r\n" +
		"POST /ipc/send_message HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	_, werr := c.Write([]byte(smuggled))
	rest, _ := io.ReadAll(r)
	if len(rest) > 0 {
		fmt.Printf("SMUGGLE=BREACH (answered after the tunnel: %q)\n", clip(string(rest), 200))
		return
	}
	fmt.Printf("SMUGGLE=HELD (nothing after the tunnel; write: %v)\n", werr)
}

// proxyFlood: pwn proxy-flood NAME N TARGET HOLD opens N tunnels to TARGET
// at once, holds the ones the proxy opened for HOLD, and prints how many it
// opened and how many it refused.
func proxyFlood(args []string) {
	if len(args) < 4 {
		fmt.Println("usage: pwn proxy-flood NAME N TARGET HOLD")
		return
	}
	n, _ := strconv.Atoi(args[1])
	hold, _ := time.ParseDuration(args[3])
	var opened, refused, failed atomic.Int64
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.DialTimeout("tcp", proxyAddr, 5*time.Second)
			if err != nil {
				failed.Add(1)
				return
			}
			defer c.Close()
			// Well inside the escape host's 20 s run limit: a connection still
			// waiting for its answer then counts as failed (the check reports
			// it), and the run ends with what it saw rather than being killed
			// unobserved. Every connection is answered in well under a second
			// once the agent's relay is bounded (it used to run out of
			// descriptors and stop accepting).
			_ = c.SetDeadline(time.Now().Add(hold + 8*time.Second))
			fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: x\r\n\r\n", args[2])
			status, err := bufio.NewReader(c).ReadString('\n')
			switch {
			case err != nil:
				failed.Add(1)
			case strings.Contains(status, " 200 "):
				opened.Add(1)
				time.Sleep(hold)
			default:
				refused.Add(1)
			}
		}()
	}
	wg.Wait()
	fmt.Printf("%s-OPENED=%d %s-REFUSED=%d %s-FAILED=%d\n", args[0], opened.Load(), args[0], refused.Load(), args[0], failed.Load())
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
