package mcpconfig

import (
	"fmt"
	"strings"

	"github.com/toolgate/toolgate/internal/netguard"
)

// Network is a remote server's reach (docs/mcp-config.md, "network"; docs/trust.md,
// "Reach"): what its owner adds to netguard's defaults, or overrides, for this server
// alone. The zero value, or no member, is the default policy.
type Network struct {
	// Deny and Allow are ranges: CIDR prefixes or single addresses, strict syntax.
	Deny  []string `json:"deny,omitempty"`
	Allow []string `json:"allow,omitempty"`
	// DenyHosts and AllowHosts are names (".corp.example": the domain and every name
	// under it). Allowed names are exempt from the name rules; their addresses are
	// still checked.
	DenyHosts  []string `json:"deny_hosts,omitempty"`
	AllowHosts []string `json:"allow_hosts,omitempty"`
	// NoDefaults drops the default deny list (link-local, metadata …).
	NoDefaults bool `json:"no_defaults,omitempty"`
	// Loopback is "named" (the default: only through a URL naming it), "allow" (through
	// any name) or "deny".
	Loopback string `json:"loopback,omitempty"`
	// DenyPrivate refuses the private ranges too.
	DenyPrivate bool `json:"deny_private,omitempty"`
	// InsecureHTTP allows plain http to hosts other than loopback.
	InsecureHTTP bool `json:"insecure_http,omitempty"`
}

// MaxNetworkEntries bounds each list of the network member.
const MaxNetworkEntries = 256

// networkMembers are the network object's members, camelCase and snake_case.
var networkMembers = map[string]string{
	"deny": "deny", "allow": "allow",
	"denyHosts": "deny_hosts", "deny_hosts": "deny_hosts",
	"allowHosts": "allow_hosts", "allow_hosts": "allow_hosts",
	"noDefaults": "no_defaults", "no_defaults": "no_defaults",
	"loopback":    "loopback",
	"denyPrivate": "deny_private", "deny_private": "deny_private",
	"insecureHttp": "insecure_http", "insecure_http": "insecure_http",
}

// Policy is the netguard policy n stands for. n was checked when it was read, so an
// error here means a definition stored by another release; the dial refuses then.
func (n *Network) Policy() (netguard.Policy, error) {
	var p netguard.Policy
	if n == nil {
		return p, nil
	}
	var err error
	if p.Deny, err = netguard.ParseRanges(n.Deny); err != nil {
		return p, err
	}
	if p.Allow, err = netguard.ParseRanges(n.Allow); err != nil {
		return p, err
	}
	p.DenyHosts, p.AllowHosts = n.DenyHosts, n.AllowHosts
	p.NoDefaults, p.DenyPrivate, p.InsecureHTTP = n.NoDefaults, n.DenyPrivate, n.InsecureHTTP
	switch n.Loopback {
	case "", "named":
		p.Loopback = netguard.LoopbackNamed
	case "allow":
		p.Loopback = netguard.LoopbackAllow
	case "deny":
		p.Loopback = netguard.LoopbackDeny
	default:
		return p, fmt.Errorf("mcpconfig: network loopback %q is not named, allow or deny", n.Loopback)
	}
	return p, nil
}

// network reads the network member of a remote server.
func (p *entryParser) network(obj map[string]any, t *Transport) {
	v, ok := field(obj, "network")
	if !ok {
		return
	}
	path := pathMember(p.path, "network")
	m, isObj := v.(map[string]any)
	if !isObj {
		p.errorf(path, "must be an object (deny, allow, denyHosts, allowHosts, noDefaults, loopback, denyPrivate, insecureHttp)")
		return
	}
	n := &Network{}
	seen := map[string]bool{}
	failed := false
	for _, k := range sortedKeys(m) {
		kp := pathMember(path, k)
		canon, known := networkMembers[k]
		if !known {
			p.errorf(kp, "is not a network setting: it takes deny, allow, denyHosts, allowHosts, noDefaults, loopback, denyPrivate, insecureHttp (docs/mcp-config.md)")
			failed = true
			continue
		}
		if seen[canon] {
			p.errorf(kp, "repeats %s: keep one", canon)
			failed = true
			continue
		}
		seen[canon] = true
		switch canon {
		case "deny", "allow", "deny_hosts", "allow_hosts":
			list, ok := stringList(m[k])
			if !ok || len(list) > MaxNetworkEntries {
				p.errorf(kp, "must be an array of at most %d strings", MaxNetworkEntries)
				failed = true
				continue
			}
			switch canon {
			case "deny", "allow":
				if _, err := netguard.ParseRanges(list); err != nil {
					p.errorf(kp, "%s", strings.TrimPrefix(err.Error(), "netguard: "))
					failed = true
					continue
				}
				if canon == "deny" {
					n.Deny = list
				} else {
					n.Allow = list
				}
			case "deny_hosts", "allow_hosts":
				for _, h := range list {
					if h == "" || len(h) > 253 || strings.ContainsFunc(h, func(r rune) bool { return r <= ' ' || r > '~' }) {
						p.errorf(kp, "holds %q: a host name is 1–253 printable ASCII characters (write a non-ASCII name in its xn-- form)", h)
						failed = true
					}
				}
				if canon == "deny_hosts" {
					n.DenyHosts = list
				} else {
					n.AllowHosts = list
				}
			}
		case "loopback":
			s, isStr := m[k].(string)
			if !isStr || (s != "named" && s != "allow" && s != "deny") {
				p.errorf(kp, `must be "named" (the default), "allow" or "deny"`)
				failed = true
				continue
			}
			n.Loopback = s
		default:
			b, isBool := m[k].(bool)
			if !isBool {
				p.errorf(kp, "must be true or false")
				failed = true
				continue
			}
			switch canon {
			case "no_defaults":
				n.NoDefaults = b
			case "deny_private":
				n.DenyPrivate = b
			case "insecure_http":
				n.InsecureHTTP = b
			}
		}
	}
	if !failed {
		t.Network = n
	}
}

// stringList reads a JSON array of strings.
func stringList(v any) ([]string, bool) {
	arr, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(arr))
	for _, e := range arr {
		s, ok := e.(string)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}
