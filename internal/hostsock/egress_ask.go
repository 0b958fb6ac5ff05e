package hostsock

import (
	"context"
	"net/netip"
)

// Egress under egress_ask (DESIGN.md, "Egress proxy" and "Approvals"): a
// destination the profile's list does not hold is not refused at once but
// put to the owner — when it is one the list could have admitted: a public
// address, or a name that resolves only to public addresses, as "*" would
// admit it. Loopback, private and the other forbidden classes are refused
// outright, never asked, unless the profile lists that very address as an
// IP literal (on another port): the admin vouched for the address, and the
// owner is asked about the port.

// decide answers the addresses to dial for t and the rule (or the owner's
// word) that allows it, or a *denial, or a failed lookup. A question to
// the owner waits under ctx alone; lookups are bounded by the dial timeout.
func (e *egress) decide(ctx context.Context, t egressTarget) ([]netip.Addr, egressRule, error) {
	lctx, cancel := context.WithTimeout(ctx, e.lim.DialTimeout)
	defer cancel()
	if _, _, listed := e.policy.match(t); listed || e.ask == nil || !e.policy.network {
		return e.policy.decide(lctx, e.resolver, e.own, t)
	}
	asked := egressPolicy{network: true, rules: []egressRule{{text: "the owner", any: true, port: t.Port}}}
	if t.IP.IsValid() && e.policy.listsAddr(t.IP) {
		asked.rules = append([]egressRule{{text: "the owner", ip: t.IP, port: t.Port}}, asked.rules...)
	}
	addrs, _, err := asked.decide(lctx, e.resolver, e.own, t)
	if err != nil {
		return nil, egressRule{}, err
	}
	host := t.Host
	if t.IP.IsValid() {
		host = t.IP.String()
	}
	how, err := e.ask(ctx, host, int(t.Port))
	if err != nil {
		return nil, egressRule{}, deny("%s is not in this group's egress list, and %s", t, err.Error())
	}
	return addrs, egressRule{text: how}, nil
}

// listsAddr reports whether an entry of the list is the IP literal a.
func (p egressPolicy) listsAddr(a netip.Addr) bool {
	for _, r := range p.rules {
		if r.ip.IsValid() && r.ip == a {
			return true
		}
	}
	return false
}
