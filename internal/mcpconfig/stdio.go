package mcpconfig

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// stdio reads command, args, env and cwd.
func (p *entryParser) stdio(obj map[string]any, t *Transport) {
	if cwd, ok := p.str(obj, "cwd"); ok {
		if abs, ok := p.absPath(pathMember(p.path, "cwd"), cwd, p.opts.BaseDir, "the config file's directory"); ok {
			t.Cwd = abs
		}
	}
	cmdPath := pathMember(p.path, "command")
	if cmd, ok := p.str(obj, "command"); !ok {
		if _, present := field(obj, "command"); !present {
			p.errorf(cmdPath, "required for a stdio server")
		}
	} else if strings.ContainsAny(cmd, " \t") && !filepath.IsAbs(cmd) {
		p.errorf(cmdPath, "holds a space: toolgate runs the command without a shell, so put its arguments in args")
	} else if strings.ContainsRune(cmd, '/') {
		base, what := t.Cwd, "cwd"
		if base == "" {
			base, what = p.opts.BaseDir, "the config file's directory"
		}
		if abs, ok := p.absPath(cmdPath, cmd, base, what); ok {
			t.Command = abs
		}
	} else if problem := bareCommandProblem(cmd); problem != "" {
		p.errorf(cmdPath, "%s", problem)
	} else {
		t.Command = cmd
	}
	p.args(obj, t)
	p.env(obj, t)
}

// absPath checks a cwd or command path and makes it absolute against base (described
// as what in the error when missing).
func (p *entryParser) absPath(path, s, base, what string) (string, bool) {
	switch {
	case s == "":
		p.errorf(path, "must not be empty")
	case hasRef(s):
		p.errorf(path, "holds a ${…} reference; references are resolved only in args, env and headers: write the path")
	case len(s) > MaxPathBytes:
		p.errorf(path, "is %d bytes, at most %d", len(s), MaxPathBytes)
	case textProblem(s, false) != "":
		p.errorf(path, "%s", textProblem(s, false))
	case s == "~" || strings.HasPrefix(s, "~/"):
		p.errorf(path, "starts with ~, which is not expanded (no shell runs it): write the absolute path")
	case filepath.IsAbs(s):
		return filepath.Clean(s), true
	case base == "":
		p.errorf(path, "is a relative path: write an absolute one (a relative path is resolved against %s, which this install does not have)", what)
	case len(base)+1+len(s) > MaxPathBytes:
		p.errorf(path, "is over %d bytes once resolved against %s", MaxPathBytes, what)
	default:
		return filepath.Join(base, s), true
	}
	return "", false
}

// bareCommandProblem checks a command without a '/': a program name found in PATH.
func bareCommandProblem(cmd string) string {
	switch {
	case cmd == "":
		return "must not be empty"
	case hasRef(cmd):
		return "holds a ${…} reference; references are resolved only in args, env and headers: write the command"
	case len(cmd) > 255:
		return fmt.Sprintf("is %d bytes, longer than any program name", len(cmd))
	case textProblem(cmd, false) != "":
		return textProblem(cmd, false)
	case strings.ContainsAny(cmd, " \t"):
		return "holds a space: toolgate runs the command without a shell, so put its arguments in args"
	case cmd == "." || cmd == "..":
		return "is not a program name"
	case cmd == "~":
		return "starts with ~, which is not expanded (no shell runs it): write the absolute path"
	}
	return ""
}

// args reads the argument list; credential-looking arguments become secrets.
func (p *entryParser) args(obj map[string]any, t *Transport) {
	v, ok := field(obj, "args")
	if !ok {
		return
	}
	path := pathMember(p.path, "args")
	list, isList := v.([]any)
	if !isList {
		p.errorf(path, "must be an array of strings")
		return
	}
	if len(list) > MaxArgs {
		p.errorf(path, "holds %d arguments, at most %d", len(list), MaxArgs)
		return
	}
	prev := ""
	for i, item := range list {
		ip := pathIndex(path, i)
		s, isStr := item.(string)
		if !isStr {
			p.errorf(ip, "must be a string%s", quoteHint(item))
			continue
		}
		value, shown, hadRef, failed := p.value(ip, s, MaxArgBytes)
		if failed {
			prev = s
			continue
		}
		if problem := textProblem(value, true); problem != "" {
			p.errorf(ip, "%s", problem)
			prev = s
			continue
		}
		redacted, secret := argSecret(prev, shown)
		if !secret && hadRef {
			redacted, secret = shown, true
		}
		prev = s
		if !secret {
			t.Args = append(t.Args, Arg{Value: value})
			continue
		}
		name := argSecretPrefix + strconv.Itoa(i)
		t.Args = append(t.Args, Arg{Secret: name, Redacted: redacted, Digest: p.secret(name, value)})
		p.warnf(ip, "looks like a credential, so it is kept in the keystore; but every local user can read a process's arguments (/proc/PID/cmdline): pass it in env if the server can take it there")
	}
}

// env reads the environment; every value is a secret.
func (p *entryParser) env(obj map[string]any, t *Transport) {
	p.secretMap(obj, "env", "variables", MaxEnv, MaxEnvValueBytes, envNameProblem, func(path, name, value string) {
		if strings.IndexByte(value, 0) >= 0 {
			p.errorf(path, "holds a NUL byte, which an environment cannot carry")
			return
		}
		secret := envSecretPrefix + name
		t.Env = append(t.Env, Var{Name: name, Secret: secret, Digest: p.secret(secret, value)})
	})
}

// envNameProblem checks an environment variable's name.
func envNameProblem(name string) string {
	switch {
	case len(name) > MaxEnvNameBytes:
		return fmt.Sprintf("the name is %d bytes, at most %d", len(name), MaxEnvNameBytes)
	case !envNameRE.MatchString(name):
		return "is not a variable name: letters, digits and '_', not starting with a digit"
	}
	return ""
}
