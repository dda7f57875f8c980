package mcpconfig

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/internal/keystore"
)

// controlRune reports C0 and C1 control characters and DEL.
func controlRune(r rune) bool { return r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 }

// invisibleRune reports characters that change how text displays without showing
// (bidi controls, zero-width characters): in a name, a command or an argument they
// make what a person reads differ from what runs.
func invisibleRune(r rune) bool {
	switch {
	case r == 0x061c, r == 0x180e, r == 0xfeff,
		r >= 0x200b && r <= 0x200f,
		r >= 0x202a && r <= 0x202e,
		r >= 0x2060 && r <= 0x2064,
		r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// textProblem describes the first character of s not allowed in shown text (names,
// commands, paths, arguments), or "". Tabs and newlines are allowed where multiline
// is true (an argument may be a script or a JSON document).
func textProblem(s string, multiline bool) string {
	for _, r := range s {
		if multiline && (r == '\t' || r == '\n') {
			continue
		}
		if r == 0 {
			return "holds a NUL byte"
		}
		if controlRune(r) {
			return fmt.Sprintf("holds control character %U", r)
		}
		if invisibleRune(r) {
			return fmt.Sprintf("holds invisible formatting character %U", r)
		}
	}
	return ""
}

// envNameRE is the portable environment variable name (POSIX: letters, digits and '_',
// not starting with a digit).
var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ownEnvPrefix marks toolgate's own variables, never handed to a server.
const ownEnvPrefix = "TOOLGATE_"

// credentialWords are the fragments that make a name look like a credential's, matched
// case-insensitively anywhere in the name with '-', '_' and '.' removed. They err
// toward hiding: a false positive only hides a value in listings (it still works).
var credentialWords = []string{
	"token", "secret", "pass", "pwd", "key", "auth", "credential", "sig", "cookie", "session", "bearer", "jwt",
}

// separators are removed from a name before it is matched against credentialWords.
var separators = strings.NewReplacer("-", "", "_", "", ".", "")

// credentialName reports whether a flag, query parameter or variable name looks like
// it carries a credential.
func credentialName(name string) bool {
	n := separators.Replace(strings.ToLower(name))
	for _, w := range credentialWords {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// tokenPrefixes start credentials whose format is public (GitHub, GitLab, OpenAI and
// Anthropic, Stripe, Slack, AWS access key ids, Google API keys and OAuth tokens, npm,
// PyPI, Hugging Face, Shopify, DigitalOcean, Linear, SendGrid).
var tokenPrefixes = []string{
	"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "sk-", "sk_live_", "sk_test_", "rk_live_",
	"xoxb-", "xoxp-", "xoxa-", "xoxs-", "xapp-", "AKIA", "ASIA", "AIza", "ya29.", "npm_", "pypi-", "hf_",
	"shpat_", "shpss_", "dop_v1_", "lin_api_", "SG.",
}

// tokenBody is what must follow a prefix for the whole to count as a token.
var tokenBody = regexp.MustCompile(`^[A-Za-z0-9_.\-]{8,}$`)

// jwtRE matches a JSON Web Token (three base64url parts, the first a JSON object).
var jwtRE = regexp.MustCompile(`^eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$`)

// looksLikeToken reports whether a value has the shape of a known credential.
func looksLikeToken(v string) bool {
	for _, p := range tokenPrefixes {
		if strings.HasPrefix(v, p) && tokenBody.MatchString(v[len(p):]) {
			return true
		}
	}
	if jwtRE.MatchString(v) {
		return true
	}
	lv := strings.ToLower(v)
	for _, scheme := range []string{"bearer ", "basic ", "token "} {
		if strings.HasPrefix(lv, scheme) && len(v) > len(scheme) {
			return true
		}
	}
	return false
}

// argSecret decides whether an argument (following prev) carries a credential, and if
// so what listings show instead:
//
//   - NAME=VALUE, -NAME=VALUE, --NAME=VALUE or NAME: VALUE with a credential-looking
//     NAME (--api-key=…, GITHUB_TOKEN=… for docker -e, "Authorization: Bearer …" for
//     an HTTP client's --header), also after a flag's "=" (--header=X-Api-Key:…):
//     "--api-key=[redacted]";
//   - the argument after a credential-looking flag without a value (--token VALUE);
//   - a URL with userinfo or a credential query parameter (postgresql://user:pw@host/db);
//   - anything holding a word shaped like a known token (ghp_…, sk-…, a JWT) or an
//     authorization scheme with its credential ("Bearer …").
func argSecret(prev, arg string) (redacted string, secret bool) {
	if shown, ok := namedCredential(arg); ok {
		return shown, true
	}
	if i := strings.IndexByte(arg, '='); i > 0 {
		if shown, ok := namedCredential(arg[i+1:]); ok {
			return arg[:i+1] + shown, true
		}
	}
	if len(prev) > 1 && prev[0] == '-' && !strings.Contains(prev, "=") && !strings.HasPrefix(arg, "-") &&
		credentialName(strings.TrimLeft(prev, "-")) {
		return keystore.Redacted, true
	}
	if strings.Contains(arg, "://") {
		if u, err := url.Parse(arg); err == nil && u.Host != "" {
			if shown, hidden := redactURLText(u); hidden {
				return shown, true
			}
		}
	}
	if looksLikeToken(arg) || authScheme.MatchString(arg) || slices.ContainsFunc(strings.FieldsFunc(arg, notTokenChar), looksLikeToken) {
		return keystore.Redacted, true
	}
	return "", false
}

// flagName is what may stand before "=" or ":" in NAME=VALUE: a flag or variable name.
var flagName = regexp.MustCompile(`^-{0,2}[A-Za-z0-9_.-]+$`)

// authScheme matches an HTTP authorization scheme followed by its credential.
var authScheme = regexp.MustCompile(`(?i)\b(bearer|basic|token)\s+[A-Za-z0-9._~+/=-]{8,}`)

// namedCredential recognises NAME=VALUE and NAME: VALUE with a credential-looking name
// and returns it with the value hidden.
func namedCredential(s string) (string, bool) {
	i := strings.IndexAny(s, "=:")
	if i <= 0 || i+1 >= len(s) || !flagName.MatchString(s[:i]) || !credentialName(strings.TrimLeft(s[:i], "-")) {
		return "", false
	}
	if s[i] == ':' && strings.HasPrefix(s[i+1:], "//") {
		return "", false // a URL's scheme, not a name
	}
	sep := s[:i+1]
	if strings.HasPrefix(s[i+1:], " ") {
		sep += " "
	}
	return sep + keystore.Redacted, true
}

// notTokenChar splits text into the words looksLikeToken judges.
func notTokenChar(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.')
}

// ref is one ${…} reference in a value.
type ref struct {
	start, end int // byte span of "${…}"
	name       string
	def        string
	hasDef     bool
}

// vscodeVariables are VS Code's predefined ${name} variables, which are not
// environment variables.
var vscodeVariables = map[string]bool{
	"workspaceFolder": true, "workspaceFolderBasename": true, "userHome": true, "pathSeparator": true,
	"cwd": true, "file": true, "fileBasename": true, "fileDirname": true, "relativeFile": true,
	"execPath": true, "defaultBuildTask": true, "lineNumber": true, "selectedText": true,
}

// otherClientRefs are reference kinds other clients resolve (VS Code's input and
// command variables, its config lookups, Cursor's workspace paths).
var otherClientRefs = map[string]bool{"input": true, "command": true, "config": true, "workspaceFolder": true}

var claudeRefRE = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)(:-(.*))?$`)

// findRefs lists the references in s: ${env:NAME} (Cursor, VS Code), ${NAME} and
// ${NAME:-default} (Claude Code). A "${" with no closing brace is literal text. Any
// other ${…} is an error rather than text, so that a reference another client resolves
// never reaches a server as the literal string "${input:token}".
func findRefs(s string) ([]ref, error) {
	var out []ref
	for i := 0; ; {
		j := strings.Index(s[i:], "${")
		if j < 0 {
			return out, nil
		}
		start := i + j
		k := strings.IndexByte(s[start+2:], '}')
		if k < 0 {
			return out, nil
		}
		end := start + 2 + k + 1
		inner := s[start+2 : end-1]
		r := ref{start: start, end: end}
		switch {
		case strings.HasPrefix(inner, "env:"):
			r.name = inner[len("env:"):]
			if !envNameRE.MatchString(r.name) {
				return nil, fmt.Errorf("a ${env:…} reference needs a variable name of letters, digits and '_'")
			}
		case claudeRefRE.MatchString(inner):
			m := claudeRefRE.FindStringSubmatch(inner)
			r.name, r.hasDef, r.def = m[1], m[2] != "", m[3]
			if vscodeVariables[r.name] {
				return nil, fmt.Errorf("${%s} is a VS Code variable, which toolgate does not resolve: write the value itself", r.name)
			}
		default:
			// Only a known prefix is named: the text between the braces sits where a
			// secret value would, so it is never echoed.
			kind := "this"
			if c := strings.IndexByte(inner, ':'); c > 0 && otherClientRefs[inner[:c]] {
				kind = "${" + inner[:c] + ":…}"
			}
			return nil, fmt.Errorf("%s reference is not one toolgate resolves: use ${env:NAME}, ${NAME} or ${NAME:-default}, or write the value", kind)
		}
		out = append(out, r)
		i = end
	}
}

// hasRef reports whether s holds anything findRefs would treat as a reference.
func hasRef(s string) bool {
	refs, err := findRefs(s)
	return err != nil || len(refs) > 0
}

// expand resolves the references in s. It returns the value, the text listings may
// show (the references themselves, with any default value hidden, since a default can
// be a credential), and whether s held a reference at all.
func expand(s string, lookup func(string) (string, bool)) (value, shown string, had bool, err error) {
	refs, err := findRefs(s)
	if err != nil || len(refs) == 0 {
		return s, s, false, err
	}
	var v, d strings.Builder
	last := 0
	for _, r := range refs {
		v.WriteString(s[last:r.start])
		d.WriteString(s[last:r.start])
		last = r.end
		if strings.HasPrefix(strings.ToUpper(r.name), ownEnvPrefix) {
			return "", "", true, fmt.Errorf("refers to %s: TOOLGATE_ variables are toolgate's own and never passed to a server", r.name)
		}
		if lookup == nil {
			return "", "", true, fmt.Errorf("refers to the environment variable %s, but this install resolves no environment references: write the value instead", r.name)
		}
		got, ok := lookup(r.name)
		switch {
		case r.hasDef && got == "":
			got = r.def
		case !ok:
			return "", "", true, fmt.Errorf("refers to the environment variable %s, which is not set where the install runs", r.name)
		}
		v.WriteString(got)
		if r.hasDef {
			d.WriteString("${" + r.name + ":-" + keystore.Redacted + "}")
		} else {
			d.WriteString(s[r.start:r.end])
		}
	}
	v.WriteString(s[last:])
	d.WriteString(s[last:])
	return v.String(), d.String(), true, nil
}
