package ops

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/store"
)

// RevokeEgress forgets what the owner allowed the group folder to reach:
// dest is a host (every port the owner allowed of it) or host:port. It
// answers how many allowances were forgotten.
func (s *Service) RevokeEgress(ctx context.Context, c domain.Caller, folder, dest string) (int, error) {
	return call(ctx, s, c, RevokeEgress, func(st *runState) (int, error) {
		if err := authorize(c, RevokeEgress, Target{Group: folder}); err != nil {
			return 0, err
		}
		host, port, err := ParseDest(dest)
		if err != nil {
			return 0, bad("%v", err)
		}
		n, err := s.cfg.Store.RevokeEgress(ctx, folder, host, port)
		if err != nil {
			return 0, err
		}
		if n > 0 {
			s.audit(ctx, st, RevokeEgress, "allow", fmt.Sprintf("%s no longer allowed to reach %s (%d allowances)", folder, dest, n))
		}
		return n, nil
	})
}

// EgressAllowed lists what the owner allowed groups to reach, of folder
// ("" every group's).
func (s *Service) EgressAllowed(ctx context.Context, folder string) ([]store.EgressAllowance, error) {
	return s.cfg.Store.ListEgressAllowed(ctx, folder)
}

// ParseDest reads a destination as /revoke takes it: host or host:port
// (an IPv6 address in brackets when a port follows); port 0 means every
// port.
func ParseDest(dest string) (host string, port int, err error) {
	host = dest
	if h, p, err := net.SplitHostPort(dest); err == nil {
		n, perr := strconv.Atoi(p)
		if perr != nil || n < 1 || n > 65535 {
			return "", 0, fmt.Errorf("%q: the port must be a number from 1 to 65535", dest)
		}
		host, port = h, n
	}
	host = strings.ToLower(strings.Trim(host, "[]"))
	if host == "" || strings.ContainsAny(host, "/ ") {
		return "", 0, fmt.Errorf("%q: want a host name or address, optionally with :port", dest)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		host = a.String() // as the egress proxy names it
	}
	return host, port, nil
}
