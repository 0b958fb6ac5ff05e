package bwrap

import (
	"testing"

	"github.com/clawpen/clawpen/internal/sandbox"
	"github.com/clawpen/clawpen/internal/sandbox/sandboxtest"
)

// TestConformance runs the suite every backend passes.
func TestConformance(t *testing.T) {
	uid, gid := writesAs()
	sandboxtest.Run(t, sandboxtest.Params{
		Name:       "bwrap",
		New:        func(t *testing.T) sandboxtest.Backend { return testBackend(t, nil) },
		UID:        uid,
		GID:        gid,
		Env:        []string{"PWD=/workspace/group"}, // bwrap sets it for --chdir
		StderrTail: sandbox.StderrTail,
		Pinned: func(t *testing.T, l *sandboxtest.Layout) sandboxtest.Backend {
			b := testBackend(t, nil)
			b.cfg.PinDir = l.Pins
			return b
		},
		AfterOpen: func(b sandboxtest.Backend, hook func()) { b.(*Backend).afterOpen = hook },
		View: []sandboxtest.ViewCase{
			{Name: "no sysfs", Script: "test -e /sys/class/net", Exit: 1},
			{Name: "synthesised etc", Script: "ls /etc; cat /etc/passwd",
				Out: etcListing(sandbox.ProbeHostSystem()) + sandbox.EtcFiles[0].Content},
			{Name: "host dirs absent", Script: "ls -A /; ls -A /home /run /run/clawpen /workspace",
				Out: "bin\ndev\netc\nhome\nlib\nlib64\nproc\nrun\nsbin\ntmp\nusr\nworkspace\n" +
					"/home:\nagent\n\n/run:\nclawpen\n\n/run/clawpen:\n\n/workspace:\nglobal\ngroup\n"},
			{Name: "own pid namespace", Script: "echo $$; cat /proc/1/comm", Out: "2\nbwrap\n"},
		},
	})
}
