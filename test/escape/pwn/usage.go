package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"
)

func init() { checks["model-hangup"] = modelHangup }

// modelHangup asks the model proxy for streamed answers and hangs up on
// each as soon as its first text arrives, hoping the host charges only
// what passed before it left. The fake provider's USAGE directive sets
// what each answer costs. The verdict is the host's (the usage it
// recorded); this prints HANGUP-<api>=<n>, the answers hung up on.
//
//	-n N              answers per API
//	-in I -out O      what each answer costs
//	-api A            anthropic, openai or both
func modelHangup(args []string) {
	fs := flag.NewFlagSet("model-hangup", flag.ExitOnError)
	n := fs.Int("n", 5, "answers per API")
	in := fs.Int("in", 1000, "input tokens per answer")
	out := fs.Int("out", 1000, "output tokens per answer")
	apis := fs.String("api", "both", "anthropic, openai or both")
	_ = fs.Parse(args)

	hc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", hostSock)
		},
	}}
	// Still coming (DRIP) when the hang-up happens.
	prompt := fmt.Sprintf("USAGE %d %d DRIP 30ms REPLY_LONG 600", *in, *out)
	body, _ := json.Marshal(map[string]any{"model": "x", "max_tokens": *out + 100, "stream": true,
		"messages": []map[string]any{{"role": "user", "content": prompt}}})
	for _, api := range []struct{ name, path, marker string }{
		{"anthropic", "/v1/messages", "text_delta"},
		{"openai", "/v1/chat/completions", `"content":"Parag`},
	} {
		if *apis != "both" && *apis != api.name {
			continue
		}
		hung := 0
		for range *n {
			if err := hangUpAfterFirstText(hc, api.path, string(body), api.marker); err != nil {
				fmt.Printf("HANGUP-%s: %v\n", api.name, err)
				continue
			}
			hung++
		}
		fmt.Printf("HANGUP-%s=%d\n", api.name, hung)
	}
}

func hangUpAfterFirstText(hc *http.Client, path, body, marker string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://clawpen"+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close() // before the answer's end: the connection goes
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.Contains(sc.Text(), marker) {
			return nil
		}
	}
	return fmt.Errorf("no text before the end: %v", sc.Err())
}
