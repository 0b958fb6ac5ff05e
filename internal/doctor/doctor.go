// Package doctor checks that a machine can run clawpen and says, for every
// problem, exactly how to fix it.
package doctor

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"
)

// Status of one check.
type Status string

// Check statuses: a FAIL makes `clawpen doctor` exit non-zero.
const (
	OK   Status = "ok"
	Warn Status = "warn"
	Fail Status = "FAIL"
)

// Finding is one check's outcome.
type Finding struct {
	Name   string
	Status Status
	Detail string
	Fix    string
}

// Report prints findings and says whether all passed.
func Report(w io.Writer, fs []Finding) bool {
	ok := true
	for _, f := range fs {
		fmt.Fprintf(w, "%-4s %-10s %s\n", f.Status, f.Name, f.Detail)
		if f.Fix != "" && f.Status != OK {
			fmt.Fprintf(w, "     %-10s fix: %s\n", "", f.Fix)
		}
		if f.Status == Fail {
			ok = false
		}
	}
	return ok
}

// DockerImage asks the Docker engine at socketPath whether it answers and
// whether image exists. It speaks the Engine API directly so doctor works
// whatever the backend.
func DockerImage(ctx context.Context, socketPath, image string) (engine, hasImage bool, detail string) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socketPath)
	}}}
	get := func(path string) (int, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://docker"+path, nil)
		if err != nil {
			return 0, err
		}
		resp, err := c.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	code, err := get("/_ping")
	if err != nil || code != http.StatusOK {
		return false, false, fmt.Sprintf("no Docker engine at %s", socketPath)
	}
	code, err = get("/images/" + url.PathEscape(image) + "/json")
	if err != nil || code != http.StatusOK {
		return true, false, fmt.Sprintf("engine answers; image %s not found", image)
	}
	return true, true, fmt.Sprintf("engine answers; image %s present", image)
}
