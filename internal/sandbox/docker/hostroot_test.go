package docker

import (
	"testing"

	"github.com/moby/moby/api/types/container"
	"github.com/stretchr/testify/assert"
)

func TestEngineSource(t *testing.T) {
	mounts := []container.MountPoint{
		{Type: "bind", Source: "/srv/clawpen", Destination: "/app"},
		{Type: "bind", Source: "/srv/data", Destination: "/app/data"},
		{Type: "bind", Source: "/var/run/docker.sock", Destination: "/var/run/docker.sock"},
		{Type: "tmpfs", Destination: "/scratch"},
		{Type: "volume", Source: "/var/lib/docker/volumes/v/_data", Destination: "/vol"},
	}
	for _, tc := range []struct {
		p, want string
		ok      bool
	}{
		{"/app", "/srv/clawpen", true},
		{"/app/groups/main", "/srv/clawpen/groups/main", true},
		{"/app/data", "/srv/data", true},
		{"/app/data/sockets", "/srv/data/sockets", true},
		{"/app2/x", "", false},
		{"/scratch/x", "", false},
		{"/vol/x", "/var/lib/docker/volumes/v/_data/x", true},
		{"/", "", false},
	} {
		got, ok := engineSource(mounts, tc.p)
		assert.Equal(t, tc.ok, ok, tc.p)
		assert.Equal(t, tc.want, got, tc.p)
	}
}

func TestIDFromMountinfo(t *testing.T) {
	const id = "8dd21d65178bb71ebbd778d4387802e64b3b8cabe8e83521f168564aac6812ac"
	mi := "71 60 0:45 / / rw,relatime - overlay overlay rw\n" +
		"89 71 254:0 /var/lib/docker/containers/" + id + "/hostname /etc/hostname rw,relatime - ext4 /dev/vda rw\n" +
		"90 71 254:0 /var/lib/docker/containers/" + id + "/hosts /etc/hosts rw,relatime - ext4 /dev/vda rw\n"
	assert.Equal(t, id, idFromMountinfo(mi))
	assert.Equal(t, "", idFromMountinfo("71 60 0:45 / / rw,relatime - ext4 /dev/vda rw\n"), "not in a container")
	assert.Equal(t, "", idFromMountinfo("89 71 254:0 /srv/hostname /etc/hostname rw - ext4 /dev/vda rw\n"), "not the engine's file")
}
