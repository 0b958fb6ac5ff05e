package docker

import (
	"context"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"
)

// BenchmarkDocker compares, side by side, the cost of a trivial container:
// the docker CLI (`docker run --rm`), the Go client's bare lifecycle
// (create, start, wait, remove), the backend's full Run (attach, limits,
// mounts, inspect, remove), and the backend's Run until the agent's first
// stdout byte ("ready"), reported as ready-ms.
func BenchmarkDocker(b *testing.B) {
	f := newFixture(b, nil)
	ctx := context.Background()

	b.Run("cli-run", func(b *testing.B) {
		for b.Loop() {
			out, err := exec.Command("docker", "run", "--rm", "--network", "none", "--entrypoint", "/bin/true", testImage).CombinedOutput()
			require.NoError(b, err, string(out))
		}
	})

	b.Run("client-lifecycle", func(b *testing.B) {
		cli := f.b.Client()
		for b.Loop() {
			c, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
				Config:     &container.Config{Image: testImage, Entrypoint: []string{"/bin/true"}, Labels: f.b.labels(f.spec(b))},
				HostConfig: &container.HostConfig{NetworkMode: "none"},
			})
			require.NoError(b, err)
			wait := cli.ContainerWait(ctx, c.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
			_, err = cli.ContainerStart(ctx, c.ID, client.ContainerStartOptions{})
			require.NoError(b, err)
			select {
			case r := <-wait.Result:
				require.Zero(b, r.StatusCode)
			case err := <-wait.Error:
				require.NoError(b, err)
			}
			_, err = cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true})
			require.NoError(b, err)
		}
	})

	b.Run("backend-run", func(b *testing.B) {
		for b.Loop() {
			res, err := f.b.run(ctx, f.spec(b), []string{"/bin/true"})
			require.NoError(b, err)
			require.Equal(b, 0, res.ExitCode)
		}
	})

	b.Run("backend-agent-ready", func(b *testing.B) {
		f.b.cfg.Command = nil // the image's clawpen-agent
		var ready time.Duration
		for b.Loop() {
			spec := f.spec(b)
			w := &firstByte{start: time.Now()}
			spec.Stdout = w
			_, err := f.b.Run(ctx, spec)
			require.NoError(b, err)
			ready += w.at
		}
		b.ReportMetric(float64(ready.Milliseconds())/float64(b.N), "ready-ms")
	})
}

// firstByte records when the first byte arrived, relative to start.
type firstByte struct {
	start time.Time
	once  sync.Once
	at    time.Duration
}

func (w *firstByte) Write(p []byte) (int, error) {
	w.once.Do(func() { w.at = time.Since(w.start) })
	return len(p), nil
}
