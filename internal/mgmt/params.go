package mgmt

import (
	"encoding/json"
	"sort"
	"strings"
)

// Params are read strictly, by exact member name, from the canonical params
// internal/rpcwire hands over (no duplicate or case-variant members at any depth, so
// nothing here can be read two ways). Unknown members are refused rather than ignored:
// a misspelt "enabeld" in mcp/policy/set would otherwise silently keep the current
// value, which is the one thing a caller changing policy must be told about. null is
// never a value: a param is given with its type or omitted.

// param is one member a method takes: a string or a boolean, decoded into its field.
type param struct {
	name     string
	required bool
	str      *string
	flag     **bool
}

func strParam(name string, dst *string) param { return param{name: name, str: dst} }
func boolParam(name string, dst **bool) param { return param{name: name, flag: dst} }
func required(p param) param                  { p.required = true; return p }

func refParams(r *ServerRef) []param {
	return []param{
		strParam("workspace_id", &r.WorkspaceID), strParam("scope_kind", &r.ScopeKind),
		strParam("name", &r.Name), strParam("server_id", &r.ServerID),
	}
}

// readParams decodes raw (an object, or absent) into ps.
func readParams(method string, raw json.RawMessage, ps ...param) error {
	members := map[string]json.RawMessage{}
	if len(raw) > 0 {
		if raw[0] != '{' {
			return fieldError(CodeInvalidParams, "", "params of %s must be an object", method)
		}
		if err := json.Unmarshal(raw, &members); err != nil {
			return fieldError(CodeInvalidParams, "", "params of %s are not an object", method)
		}
	}
	known := make(map[string]bool, len(ps))
	for _, p := range ps {
		known[p.name] = true
	}
	var unknown []string
	for k := range members {
		if !known[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		names := make([]string, len(ps))
		for i, p := range ps {
			names[i] = p.name
		}
		return fieldError(CodeInvalidParams, unknown[0], "unknown member %q: %s takes %s",
			unknown[0], method, takes(names))
	}
	for _, p := range ps {
		v, ok := members[p.name]
		if !ok {
			if p.required {
				return fieldError(CodeInvalidParams, p.name, "%s is required", p.name)
			}
			continue
		}
		switch {
		case p.str != nil:
			if len(v) == 0 || v[0] != '"' || json.Unmarshal(v, p.str) != nil {
				return fieldError(CodeInvalidParams, p.name, "%s must be a string", p.name)
			}
		case p.flag != nil:
			var b bool
			if (string(v) != "true" && string(v) != "false") || json.Unmarshal(v, &b) != nil {
				return fieldError(CodeInvalidParams, p.name, "%s must be true or false (to leave it as it is, omit the member)", p.name)
			}
			*p.flag = &b
		}
	}
	return nil
}

func takes(names []string) string {
	if len(names) == 0 {
		return "no params"
	}
	return strings.Join(names, ", ")
}

// decodeList and the others read one method's params.
func decodeList(raw json.RawMessage) (p ListParams, err error) {
	return p, readParams(MethodList, raw, strParam("workspace_id", &p.WorkspaceID))
}

func decodeInstall(raw json.RawMessage) (p InstallParams, err error) {
	return p, readParams(MethodInstall, raw,
		strParam("workspace_id", &p.WorkspaceID), strParam("scope_kind", &p.ScopeKind),
		required(strParam("config_json", &p.ConfigJSON)),
		boolParam("enabled", &p.Enabled), boolParam("allow_implicit_invocation", &p.AllowImplicitInvocation))
}

func decodePolicySet(raw json.RawMessage) (p PolicySetParams, err error) {
	ps := append(refParams(&p.ServerRef),
		boolParam("enabled", &p.Enabled), boolParam("allow_implicit_invocation", &p.AllowImplicitInvocation))
	return p, readParams(MethodPolicySet, raw, ps...)
}

func decodeRef(method string, raw json.RawMessage) (r ServerRef, err error) {
	return r, readParams(method, raw, refParams(&r)...)
}
