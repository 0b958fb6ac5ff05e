package main

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// Attacks on credential injection: TLS spoken by hand inside a CONNECT to
// a host the profile holds a credential for, asking the host to use it for
// something else.

func init() {
	checks["cred-tls"] = credTLS
	checks["cred-raw"] = credRaw
}

// tunnelTLS opens CONNECT target through the relay and a TLS session in it
// naming sni ("" names none); the attacker trusts any certificate.
func tunnelTLS(target, sni string) (*tls.Conn, error) {
	c, err := net.DialTimeout("tcp", proxyAddr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target); err != nil {
		c.Close()
		return nil, err
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("no CONNECT answer: %w", err)
	}
	if resp.StatusCode != 200 {
		c.Close()
		return nil, fmt.Errorf("CONNECT refused: %s", resp.Status)
	}
	tc := tls.Client(c, &tls.Config{ServerName: sni, InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
	if err := tc.Handshake(); err != nil {
		c.Close()
		return nil, fmt.Errorf("TLS: %w", err)
	}
	return tc, nil
}

// credTLS: pwn cred-tls NAME TARGET SNI HOST URI sends one GET URI with
// Host HOST over TLS naming SNI ("-" for none) inside CONNECT TARGET, and
// judges the answer: a 2xx is a breach (the host forwarded it).
func credTLS(args []string) {
	if len(args) < 5 {
		fmt.Println("usage: pwn cred-tls NAME TARGET SNI HOST URI")
		return
	}
	name, target, sni, host, uri := args[0], args[1], args[2], args[3], args[4]
	if sni == "-" {
		sni = ""
	}
	tc, err := tunnelTLS(target, sni)
	if err != nil {
		verdict(name, err)
		return
	}
	defer tc.Close()
	if _, err := fmt.Fprintf(tc, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", uri, host); err != nil {
		verdict(name, err)
		return
	}
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		verdict(name, fmt.Errorf("no answer: %w", err))
		return
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
	if resp.StatusCode/100 == 2 {
		fmt.Printf("%s=BREACH (%s %q)\n", name, resp.Status, b)
		return
	}
	fmt.Printf("%s=HELD (%s %s)\n", name, resp.Status, strings.TrimSpace(string(b)))
}

// credRaw: pwn cred-raw NAME TARGET RAW writes RAW (with \r and \n written
// as such) over TLS inside CONNECT TARGET and prints NAME-STATUS: lines for
// every answer it reads until the host closes; the host side judges what
// reached the upstream.
func credRaw(args []string) {
	if len(args) < 3 {
		fmt.Println("usage: pwn cred-raw NAME TARGET RAW")
		return
	}
	name, target := args[0], args[1]
	raw := strings.NewReplacer(`\r`, "\r", `\n`, "\n").Replace(args[2])
	tc, err := tunnelTLS(target, "")
	if err != nil {
		fmt.Printf("%s-TUNNEL: %v\n", name, err)
		return
	}
	defer tc.Close()
	if _, err := io.WriteString(tc, raw); err != nil {
		fmt.Printf("%s-WRITE: %v\n", name, err)
		return
	}
	// Nothing more comes: the host answers what it read, then closes.
	_ = tc.CloseWrite()
	br := bufio.NewReader(tc)
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			break
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		fmt.Printf("%s-STATUS: %s %s\n", name, resp.Status, strings.TrimSpace(string(b)))
	}
	fmt.Printf("%s-DONE\n", name)
}
