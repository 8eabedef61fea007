package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
)

// Routes maps the address of each broker, as the cluster's metadata names
// it (host:port), to the address of the proxy that a member reaches that
// broker through. The key "*" routes every address that has no key of its
// own, as the single-broker harness did.
type Routes map[string]string

// String writes the routes as broker=proxy pairs joined by commas, sorted
// by broker address: the form of the member's --proxy flag.
func (r Routes) String() string {
	pairs := make([]string, 0, len(r))
	for broker, proxy := range r {
		pairs = append(pairs, broker+"="+proxy)
	}
	slices.Sort(pairs)
	return strings.Join(pairs, ",")
}

// ParseRoutes parses what [Routes.String] writes. A text without "=" is
// one proxy for every broker (the route "*").
func ParseRoutes(text string) (Routes, error) {
	routes := make(Routes)
	for part := range strings.SplitSeq(text, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		broker, proxy, found := strings.Cut(part, "=")
		if !found {
			broker, proxy = "*", part
		}
		if broker == "" || proxy == "" {
			return nil, fmt.Errorf("route %q: want broker=proxy", part)
		}
		if _, dup := routes[broker]; dup {
			return nil, fmt.Errorf("route %q: broker %s has two routes", part, broker)
		}
		routes[broker] = proxy
	}
	if len(routes) == 0 {
		return nil, errors.New("no route: want broker=proxy pairs or one proxy address")
	}
	return routes, nil
}

// Dial dials the proxy of the broker at address: the dialer that a member
// gives franz-go (kgo.Dialer). An address with no route fails, so that no
// connection of a member bypasses its proxies and a cut.
func (r Routes) Dial(ctx context.Context, network, address string) (net.Conn, error) {
	proxy, ok := r[address]
	if !ok {
		proxy, ok = r["*"]
	}
	if !ok {
		return nil, fmt.Errorf("chaos: no proxy for broker %s (routes %s)", address, r)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, proxy)
}

// MemberNetwork is the network of one member: one [Proxy] for each broker
// of the cluster, so that a cut of the member cuts it off every broker. It
// is safe for concurrent use.
type MemberNetwork struct {
	proxies map[string]*Proxy // broker address -> its proxy
}

// NewMemberNetwork starts a proxy on a free loopback port for each broker
// address.
func NewMemberNetwork(brokers []string) (*MemberNetwork, error) {
	n := &MemberNetwork{proxies: make(map[string]*Proxy)}
	for _, broker := range brokers {
		if _, dup := n.proxies[broker]; dup {
			continue
		}
		proxy, err := NewKafkaProxy("127.0.0.1:0", broker)
		if err != nil {
			n.Close()
			return nil, err
		}
		n.proxies[broker] = proxy
	}
	return n, nil
}

// Routes returns the address of the proxy of each broker.
func (n *MemberNetwork) Routes() Routes {
	routes := make(Routes, len(n.proxies))
	for broker, proxy := range n.proxies {
		routes[broker] = proxy.Addr()
	}
	return routes
}

// Cut cuts every proxy of the member (see [Proxy.Cut]).
func (n *MemberNetwork) Cut(mode CutMode) {
	for _, proxy := range n.proxies {
		proxy.Cut(mode)
	}
}

// CutBroker cuts the proxy of one broker only (see [Proxy.Cut]): the
// member still reaches the others. It reports false for a broker it has no
// proxy of.
func (n *MemberNetwork) CutBroker(broker string, mode CutMode) bool {
	proxy, ok := n.proxies[broker]
	if ok {
		proxy.Cut(mode)
	}
	return ok
}

// HealBroker heals the proxy of one broker.
func (n *MemberNetwork) HealBroker(broker string) {
	if proxy, ok := n.proxies[broker]; ok {
		proxy.Heal()
	}
}

// Arm arms a request fault on every proxy of the member (see [Arm]).
func (n *MemberNetwork) Arm(fault RequestFault) *ArmedRequest {
	proxies := make([]*Proxy, 0, len(n.proxies))
	for _, proxy := range n.proxies {
		proxies = append(proxies, proxy)
	}
	return Arm(fault, proxies...)
}

// Requests sums the requests that the proxies of the member forwarded, by
// API key and version (see [Proxy.Requests]).
func (n *MemberNetwork) Requests() []RequestCount {
	var all []RequestCount
	for _, proxy := range n.proxies {
		all = append(all, proxy.Requests()...)
	}
	return SumRequests(all)
}

// SumRequests adds up counts of the same API key and version, in key and
// version order.
func SumRequests(counts []RequestCount) []RequestCount {
	sum := make(map[[2]int16]int64)
	for _, c := range counts {
		sum[[2]int16{c.Key, c.Version}] += c.Count
	}
	out := make([]RequestCount, 0, len(sum))
	for kv, count := range sum {
		out = append(out, RequestCount{Key: kv[0], Version: kv[1], API: APIName(kv[0]), Count: count})
	}
	slices.SortFunc(out, func(a, b RequestCount) int {
		if a.Key != b.Key {
			return int(a.Key) - int(b.Key)
		}
		return int(a.Version) - int(b.Version)
	})
	return out
}

// Heal heals every proxy of the member.
func (n *MemberNetwork) Heal() {
	for _, proxy := range n.proxies {
		proxy.Heal()
	}
}

// Close closes every proxy and waits for their goroutines.
func (n *MemberNetwork) Close() {
	for _, proxy := range n.proxies {
		_ = proxy.Close()
	}
}
