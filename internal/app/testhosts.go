package app

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"strings"

	"github.com/toolgate/toolgate/internal/netguard"
)

// TestHostsEnv names a hosts file (lines "ADDRESS NAME...") that, when set, is the only
// resolver of remote upstream names: a name it does not list is "no such host", and no
// DNS query is ever sent. It exists so that tests of the real binary can resolve hostile
// names to hostile addresses without traffic leaving the machine (docs/trust.md,
// "Reach"). Every address it gives is checked by netguard like any resolved address, so
// it can make a name reach nothing a real resolver could not.
const TestHostsEnv = "TOOLGATE_TEST_HOSTS"

// hostsResolver is a netguard.Resolver over a fixed table.
type hostsResolver map[string][]netip.Addr

func (h hostsResolver) LookupNetIP(_ context.Context, network, host string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, a := range h[strings.TrimSuffix(strings.ToLower(host), ".")] {
		if network == "ip" || (network == "ip4") == a.Is4() {
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("lookup %s: no such host (%s)", host, TestHostsEnv)
	}
	return out, nil
}

// testResolver reads TestHostsEnv's file; nil (net.DefaultResolver) when it is unset.
// A file that cannot be read resolves nothing, so a broken test setup can never fall
// back to DNS.
func testResolver(log *slog.Logger) netguard.Resolver {
	p := os.Getenv(TestHostsEnv)
	if p == "" {
		return nil
	}
	h := hostsResolver{}
	f, err := os.Open(p)
	if err != nil {
		log.Warn("reading "+TestHostsEnv+": every remote name is unresolvable", "err", err)
		return h
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 2 || strings.HasPrefix(fs[0], "#") {
			continue
		}
		a, err := netip.ParseAddr(fs[0])
		if err != nil {
			continue
		}
		for _, n := range fs[1:] {
			n = strings.ToLower(n)
			h[n] = append(h[n], a)
		}
	}
	log.Warn(TestHostsEnv+" is set: remote upstream names resolve only through it", "file", p, "names", len(h))
	return h
}
