package gittool

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/workspace"
)

// Limits on arguments.
const (
	maxPaths        = 1000
	maxMessageBytes = 64 << 10
	maxLogCount     = 500
	defaultLogCount = 20
)

// Tools returns the git tools for ws.
func Tools(ws *workspace.Workspace, opts Options) []*kernel.Tool {
	r := newRunner(ws, opts)
	return []*kernel.Tool{
		r.statusTool(), r.diffTool(), r.logTool(), r.showTool(),
		r.addTool(), r.commitTool(), r.branchTool(), r.checkoutTool(),
	}
}

func schema(props map[string]any, required ...string) json.RawMessage {
	s := map[string]any{
		"$schema":              "https://json-schema.org/draft/2020-12/schema",
		"type":                 "object",
		"properties":           props,
		"additionalProperties": false,
	}
	if len(required) > 0 {
		s["required"] = required
	}
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return b
}

var (
	revisionProp = func(desc string) map[string]any {
		return map[string]any{"type": "string", "minLength": 1, "maxLength": maxRevBytes,
			"pattern": `^[^-\s][^\s]*$`, "description": desc}
	}
	pathsProp = map[string]any{
		"type": "array", "maxItems": maxPaths,
		"items":       map[string]any{"type": "string", "minLength": 1, "maxLength": 4096},
		"description": "Workspace-relative paths to limit to.",
	}
	readAnn  = kernel.Annotations{ReadOnly: true, Idempotent: true, OpenWorld: boolp(false)}
	writeAnn = kernel.Annotations{OpenWorld: boolp(false)}
)

func boolp(b bool) *bool { return &b }

func readRepo(map[string]any) (kernel.Access, error) {
	return kernel.Access{Action: kernel.ActionRead, Resource: "repo:."}, nil
}

func writeRepo(map[string]any) (kernel.Access, error) {
	return kernel.Access{Action: kernel.ActionWrite, Resource: "repo:."}, nil
}

func (r *runner) tool(name, title, desc string, in json.RawMessage, ann kernel.Annotations,
	access func(map[string]any) (kernel.Access, error), run func(context.Context, map[string]any) (*kernel.Output, error)) *kernel.Tool {
	return &kernel.Tool{
		ID: "local." + name, Title: title, Description: desc, InputSchema: in,
		Annotations: ann, Source: "toolgate", Access: access,
		Run: func(ctx context.Context, call *kernel.Call) (*kernel.Output, error) {
			if err := r.preflight(ctx); err != nil {
				return nil, err
			}
			return run(ctx, call.Args)
		},
	}
}

// text renders a git result: output, a truncation marker, and for failures an error
// result naming the subcommand.
func (r *runner) text(sub string, res *gitResult) (*kernel.Output, error) {
	if res.exitCode != 0 && !res.truncated {
		return nil, r.failure(sub, res)
	}
	s := strings.ToValidUTF8(string(res.stdout), string(utf8.RuneError))
	if res.truncated {
		if s != "" && !strings.HasSuffix(s, "\n") {
			s += "\n"
		}
		s += fmt.Sprintf("[output truncated: git printed more than %d bytes and was stopped]", r.opts.MaxOutput)
	}
	if s == "" {
		s = "(no output)"
	}
	return &kernel.Output{Text: s}, nil
}

func (r *runner) statusTool() *kernel.Tool {
	return r.tool("git_status", "Show the working tree status",
		"Shows the branch and changed, staged and untracked files (git status --porcelain=v1 --branch).",
		schema(map[string]any{}), readAnn, readRepo,
		func(ctx context.Context, _ map[string]any) (*kernel.Output, error) {
			res, err := r.run(ctx, true, "", nil, "status", "--porcelain=v1", "--branch", "--untracked-files=all", "--ignore-submodules=all")
			if err != nil {
				return nil, err
			}
			return r.text("status", res)
		})
}

func (r *runner) diffTool() *kernel.Tool {
	return r.tool("git_diff", "Show changes",
		"Shows a unified diff: unstaged changes by default, staged changes with staged=true, or the working tree (or index, with staged) against a target revision. Optional paths limit it. External diff and textconv drivers never run.",
		schema(map[string]any{
			"target":        revisionProp("Revision to compare against (a branch, tag or commit)."),
			"staged":        map[string]any{"type": "boolean", "description": "Compare the index instead of the working tree."},
			"paths":         pathsProp,
			"context_lines": map[string]any{"type": "integer", "minimum": 0, "maximum": 100},
		}), readAnn, r.pathsAccess(kernel.ActionRead, false),
		func(ctx context.Context, a map[string]any) (*kernel.Output, error) {
			argv := []string{"diff", "--no-color", "--no-ext-diff", "--no-textconv", "--ignore-submodules=all"}
			staged, _ := a["staged"].(bool)
			if staged {
				argv = append(argv, "--cached")
			}
			if n, ok := intArg(a, "context_lines"); ok {
				argv = append(argv, fmt.Sprintf("--unified=%d", n))
			}
			var target []string
			if t, ok := a["target"].(string); ok {
				id, err := r.resolveCommit(ctx, "target", t)
				if err != nil {
					return nil, err
				}
				target = []string{id}
			}
			ps, err := r.paths(stringList(a["paths"]))
			if err != nil {
				return nil, err
			}
			if !staged {
				// The work tree is read: check the files that differ first.
				list := append([]string{"diff", "--name-only", "-z", "--no-renames", "--ignore-submodules=all", "--end-of-options"}, target...)
				if err := r.refuseHardLinked(ctx, append(append(list, "--"), ps...)...); err != nil {
					return nil, err
				}
			}
			argv = append(append(append(append(argv, "--end-of-options"), target...), "--"), ps...)
			res, err := r.run(ctx, true, "", nil, argv...)
			if err != nil {
				return nil, err
			}
			return r.text("diff", res)
		})
}

// logEntry is one commit in git_log's structured output.
type logEntry struct {
	Commit  string `json:"commit"`
	Author  string `json:"author"`
	Email   string `json:"email"`
	Date    string `json:"date"`
	Subject string `json:"subject"`
}

func (r *runner) logTool() *kernel.Tool {
	t := r.tool("git_log", "Show commit history",
		"Lists commits (newest first) reachable from a revision (HEAD by default), optionally only those touching paths.",
		schema(map[string]any{
			"revision":  revisionProp("Where to start (default HEAD)."),
			"max_count": map[string]any{"type": "integer", "minimum": 1, "maximum": maxLogCount, "description": fmt.Sprintf("At most this many commits (default %d).", defaultLogCount)},
			"paths":     pathsProp,
		}), readAnn, r.pathsAccess(kernel.ActionRead, false),
		func(ctx context.Context, a map[string]any) (*kernel.Output, error) {
			n := defaultLogCount
			if v, ok := intArg(a, "max_count"); ok {
				n = v
			}
			rev := "HEAD"
			explicit := false
			if v, ok := a["revision"].(string); ok {
				rev, explicit = v, true
			}
			id, err := r.resolveCommit(ctx, "revision", rev)
			if err != nil {
				if !explicit {
					// A repository without commits has no history yet.
					return &kernel.Output{Text: "(no commits yet)", Structured: map[string]any{"commits": []logEntry{}}}, nil
				}
				return nil, err
			}
			ps, err := r.paths(stringList(a["paths"]))
			if err != nil {
				return nil, err
			}
			argv := append([]string{"log", "--no-color", "--no-show-signature", "-z",
				fmt.Sprintf("--max-count=%d", n), "--format=%H%x00%an%x00%ae%x00%aI%x00%s",
				"--end-of-options", id, "--"}, ps...)
			res, err := r.run(ctx, true, "", nil, argv...)
			if err != nil {
				return nil, err
			}
			if res.exitCode != 0 {
				return nil, r.failure("log", res)
			}
			fields := strings.Split(string(res.stdout), "\x00")
			entries := []logEntry{}
			var b strings.Builder
			for i := 0; i+4 < len(fields); i += 5 {
				e := logEntry{Commit: strings.TrimLeft(fields[i], "\n"), Author: fields[i+1], Email: fields[i+2], Date: fields[i+3], Subject: fields[i+4]}
				for _, p := range []*string{&e.Author, &e.Email, &e.Subject} {
					*p = strings.ToValidUTF8(*p, string(utf8.RuneError))
				}
				entries = append(entries, e)
				fmt.Fprintf(&b, "%s %s %s <%s> %s\n", e.Commit, e.Date, e.Author, e.Email, e.Subject)
			}
			if res.truncated {
				fmt.Fprintf(&b, "[output truncated: git printed more than %d bytes and was stopped]\n", r.opts.MaxOutput)
			}
			return &kernel.Output{Text: strings.TrimSuffix(b.String(), "\n"), Structured: map[string]any{"commits": entries, "truncated": res.truncated}}, nil
		})
	t.OutputSchema = schema(map[string]any{
		"commits": map[string]any{"type": "array", "items": map[string]any{
			"type": "object", "additionalProperties": false,
			"required": []string{"commit", "author", "email", "date", "subject"},
			"properties": map[string]any{
				"commit": map[string]any{"type": "string"}, "author": map[string]any{"type": "string"},
				"email": map[string]any{"type": "string"}, "date": map[string]any{"type": "string"},
				"subject": map[string]any{"type": "string"},
			}}},
		"truncated": map[string]any{"type": "boolean"},
	}, "commits")
	return t
}

func (r *runner) showTool() *kernel.Tool {
	return r.tool("git_show", "Show a commit or a file at a revision",
		"Shows a commit (message, stat and patch), or with path the file's content at that revision.",
		schema(map[string]any{
			"revision": revisionProp("A branch, tag or commit."),
			"path":     map[string]any{"type": "string", "minLength": 1, "maxLength": 4096, "description": "Workspace-relative file to show at that revision."},
		}, "revision"), readAnn, r.pathAccess(kernel.ActionRead),
		func(ctx context.Context, a map[string]any) (*kernel.Output, error) {
			rev, _ := a["revision"].(string)
			id, err := r.resolveCommit(ctx, "revision", rev)
			if err != nil {
				return nil, err
			}
			argv := []string{"show", "--no-color", "--no-ext-diff", "--no-textconv", "--no-show-signature"}
			if p, ok := a["path"].(string); ok {
				ps, err := r.paths([]string{p})
				if err != nil {
					return nil, err
				}
				argv = append(argv, "--end-of-options", id+":"+ps[0])
			} else {
				argv = append(argv, "--format=fuller", "--stat", "--patch", "--end-of-options", id)
			}
			res, err := r.run(ctx, true, "", nil, argv...)
			if err != nil {
				return nil, err
			}
			return r.text("show", res)
		})
}

func (r *runner) addTool() *kernel.Tool {
	return r.tool("git_add", "Stage files",
		"Stages the given workspace paths (git add -- paths). Paths outside the workspace are refused.",
		schema(map[string]any{
			"paths": map[string]any{"type": "array", "minItems": 1, "maxItems": maxPaths,
				"items": map[string]any{"type": "string", "minLength": 1, "maxLength": 4096}},
		}, "paths"), kernel.Annotations{Idempotent: true, OpenWorld: boolp(false)}, r.pathsAccess(kernel.ActionWrite, true),
		func(ctx context.Context, a map[string]any) (*kernel.Output, error) {
			ps, err := r.paths(stringList(a["paths"]))
			if err != nil {
				return nil, err
			}
			if len(ps) == 0 {
				return nil, kernel.Failed(kernel.CodeInvalidArguments, "paths must name at least one file")
			}
			// What add would stage: changed tracked files and untracked ones not ignored.
			if err := r.refuseHardLinked(ctx, append([]string{"ls-files", "-z", "--modified", "--others", "--exclude-standard", "--"}, ps...)...); err != nil {
				return nil, err
			}
			res, err := r.run(ctx, false, "", nil, append([]string{"add", "--"}, ps...)...)
			if err != nil {
				return nil, err
			}
			if res.exitCode != 0 {
				return nil, r.failure("add", res)
			}
			return &kernel.Output{Text: fmt.Sprintf("staged %d path(s): %s", len(ps), strings.Join(ps, ", "))}, nil
		})
}

func (r *runner) commitTool() *kernel.Tool {
	return r.tool("git_commit", "Commit staged changes",
		fmt.Sprintf("Commits the staged changes with a message. Hooks and signing never run. When the repository configures no identity the commit is made as %s <%s>.", r.opts.Name, r.opts.Email),
		schema(map[string]any{
			"message":     map[string]any{"type": "string", "minLength": 1, "maxLength": maxMessageBytes},
			"allow_empty": map[string]any{"type": "boolean", "description": "Allow a commit with no changes."},
		}, "message"), writeAnn, writeRepo,
		func(ctx context.Context, a map[string]any) (*kernel.Output, error) {
			msg, _ := a["message"].(string)
			if strings.TrimSpace(msg) == "" || strings.IndexByte(msg, 0) >= 0 || len(msg) > maxMessageBytes {
				return nil, kernel.Failed(kernel.CodeInvalidArguments, "message must be non-blank text without NUL bytes, at most %d bytes", maxMessageBytes)
			}
			var ident []string
			for key, def := range map[string]string{"user.name": r.opts.Name, "user.email": r.opts.Email} {
				res, err := r.run(ctx, true, "", nil, "config", "--get", key)
				if err != nil {
					return nil, err
				}
				if res.exitCode != 0 || strings.TrimSpace(string(res.stdout)) == "" {
					ident = append(ident, "-c", key+"="+def)
				}
			}
			argv := []string{"commit", "--no-verify", "--no-gpg-sign", "--cleanup=strip", "--file=-"}
			if b, _ := a["allow_empty"].(bool); b {
				argv = append(argv, "--allow-empty")
			}
			res, err := r.run(ctx, false, msg, ident, argv...)
			if err != nil {
				return nil, err
			}
			if res.exitCode != 0 {
				// "nothing to commit" goes to stdout.
				if len(res.stderr) == 0 {
					res.stderr = res.stdout
				}
				return nil, r.failure("commit", res)
			}
			return r.text("commit", res)
		})
}

func (r *runner) branchTool() *kernel.Tool {
	return r.tool("git_branch", "List branches",
		"Lists local branches (and remote-tracking ones with all=true); the current one is marked with *.",
		schema(map[string]any{
			"all": map[string]any{"type": "boolean", "description": "Include remote-tracking branches."},
		}), readAnn, readRepo,
		func(ctx context.Context, a map[string]any) (*kernel.Output, error) {
			argv := []string{"branch", "--list", "--no-color", "--no-column",
				"--format=%(HEAD) %(refname:short) %(objectname:short) %(upstream:short)"}
			if b, _ := a["all"].(bool); b {
				argv = append(argv, "--all")
			}
			res, err := r.run(ctx, true, "", nil, argv...)
			if err != nil {
				return nil, err
			}
			return r.text("branch", res)
		})
}

func (r *runner) checkoutTool() *kernel.Tool {
	return r.tool("git_checkout", "Switch branches",
		"Switches to a branch, or detaches HEAD at another revision; with create_branch, creates that branch at ref and switches to it. Refuses when local changes would be overwritten.",
		schema(map[string]any{
			"ref":           revisionProp("Branch to switch to, or revision to start from."),
			"create_branch": revisionProp("Name of a new branch to create at ref."),
		}, "ref"), writeAnn, writeRepo,
		func(ctx context.Context, a map[string]any) (*kernel.Output, error) {
			ref, _ := a["ref"].(string)
			id, err := r.resolveCommit(ctx, "ref", ref)
			if err != nil {
				return nil, err
			}
			var argv []string
			if name, ok := a["create_branch"].(string); ok {
				if err := checkBranchName(name); err != nil {
					return nil, err
				}
				argv = []string{"switch", "--no-guess", "-c", name, "--end-of-options", id}
			} else {
				res, err := r.run(ctx, true, "", nil, "rev-parse", "--verify", "--quiet", "--end-of-options", "refs/heads/"+ref)
				if err != nil {
					return nil, err
				}
				if res.exitCode == 0 {
					argv = []string{"switch", "--no-guess", "--end-of-options", ref}
				} else {
					argv = []string{"switch", "--detach", "--end-of-options", id}
				}
			}
			if err := r.refuseProtectedChanges(ctx, id); err != nil {
				return nil, err
			}
			res, err := r.run(ctx, false, "", nil, argv...)
			if err != nil {
				return nil, err
			}
			if res.exitCode != 0 {
				return nil, r.failure("switch", res)
			}
			out := strings.TrimSpace(string(res.stderr) + string(res.stdout))
			return &kernel.Output{Text: out}, nil
		})
}

// pathsAccess derives the resource of a call with optional paths: the one path, or
// the deepest directory all paths share, or the repository when none is given.
func (r *runner) pathsAccess(action kernel.Action, requirePaths bool) func(map[string]any) (kernel.Access, error) {
	return func(a map[string]any) (kernel.Access, error) {
		raw := stringList(a["paths"])
		if len(raw) == 0 {
			if requirePaths {
				return kernel.Access{}, kernel.Failed(kernel.CodeInvalidArguments, "paths must name at least one file")
			}
			return kernel.Access{Action: action, Resource: "repo:."}, nil
		}
		ps, err := r.paths(raw)
		if err != nil {
			return kernel.Access{}, err
		}
		return kernel.Access{Action: action, Resource: "path:" + commonDir(ps)}, nil
	}
}

// pathAccess derives the resource of a call with an optional single path.
func (r *runner) pathAccess(action kernel.Action) func(map[string]any) (kernel.Access, error) {
	return func(a map[string]any) (kernel.Access, error) {
		p, ok := a["path"].(string)
		if !ok {
			return kernel.Access{Action: action, Resource: "repo:."}, nil
		}
		ps, err := r.paths([]string{p})
		if err != nil {
			return kernel.Access{}, err
		}
		return kernel.Access{Action: action, Resource: "path:" + ps[0]}, nil
	}
}

// commonDir is the one path, or the deepest directory containing all of them.
func commonDir(ps []string) string {
	if len(ps) == 1 {
		return ps[0]
	}
	common := strings.Split(ps[0], "/")
	for _, p := range ps[1:] {
		parts := strings.Split(p, "/")
		n := 0
		for n < len(common) && n < len(parts) && common[n] == parts[n] {
			n++
		}
		common = common[:n]
	}
	if len(common) == 0 {
		return "."
	}
	return path.Join(common...)
}

func stringList(v any) []string {
	arr, _ := v.([]any)
	out := make([]string, 0, len(arr))
	for _, x := range arr {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	if ss, ok := v.([]string); ok {
		out = append(out, ss...)
	}
	return out
}

func intArg(a map[string]any, name string) (int, bool) {
	switch n := a[name].(type) {
	case float64:
		return int(n), n == float64(int(n))
	case int:
		return n, true
	case json.Number:
		i, err := n.Int64()
		return int(i), err == nil
	}
	return 0, false
}
