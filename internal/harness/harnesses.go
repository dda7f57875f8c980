package harness

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The harness table. Each entry's file shape, default location, naming rule and launch
// method are documented, with sources, in docs/harnesses.md.

// mcpUnderscore is the Claude Code / Codex / DeepSeek display form:
// mcp__<server>__<tool>, each part with characters outside [A-Za-z0-9_-] mapped to '_'.
func mcpUnderscore(server, tool string) string {
	return "mcp__" + sanitize(server) + "__" + sanitize(tool)
}

// geminiName reproduces Gemini CLI's generateValidName("<server>_<tool>").
func geminiName(server, tool string) string {
	n := server + "_" + tool
	if !strings.HasPrefix(n, "mcp_") {
		n = "mcp_" + n
	}
	var b strings.Builder
	for _, c := range n {
		if isSafe(c) || c == '.' || c == ':' {
			b.WriteRune(c)
		} else {
			b.WriteByte('_')
		}
	}
	n = b.String()
	if c := n[0]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_') {
		n = "_" + n
	}
	return n
}

// piServerPrefix reproduces pi-mcp-adapter's sanitizeServerPrefix: unsafe characters
// become _<hex code point>_.
func piServerPrefix(server string) string {
	var b strings.Builder
	for _, c := range server {
		if isSafe(c) {
			b.WriteRune(c)
		} else {
			fmt.Fprintf(&b, "_%x_", c)
		}
	}
	return b.String()
}

func safeOrDot(c rune) bool { return isSafe(c) || c == '.' }

// jsonFile renders a complete JSON file: the entry at path plus top-level extras.
func jsonFile(path []string, entry any, extra map[string]any) ([]byte, error) {
	var v any = entry
	for i := len(path) - 1; i >= 0; i-- {
		v = map[string]any{path[i]: v}
	}
	top := v.(map[string]any)
	for k, x := range extra {
		top[k] = x
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(top); err != nil {
		return nil, fmt.Errorf("encoding JSON: %w", err)
	}
	return buf.Bytes(), nil
}

// jsonKind fills a Harness's render/merge/parse for a JSON(C) file whose servers live in
// an object at container (for example ["mcpServers"]).
func jsonKind(h *Harness, container []string, entry func(Server) map[string]any, extra map[string]any) *Harness {
	comments := h.Format == FormatJSONC
	path := func(name string) []string { return append(append([]string(nil), container...), name) }
	h.render = func(s Server) ([]byte, error) {
		return jsonFile(path(s.ServerName()), entry(s), extra)
	}
	h.merge = func(existing []byte, s Server) ([]byte, error) {
		d, err := parseJSONDoc(existing, comments)
		if err != nil {
			return nil, err
		}
		out, err := d.setPath(path(s.ServerName()), entry(s))
		if err != nil {
			return nil, err
		}
		if _, err := parseJSONDoc(out, comments); err != nil {
			return nil, fmt.Errorf("merge produced invalid JSON (%v); edit the file by hand", err)
		}
		return out, nil
	}
	h.parse = func(content []byte, name string) (map[string]any, error) {
		return jsonEntry(content, comments, path(name))
	}
	return h
}

func headersAny(h map[string]string) map[string]any {
	out := map[string]any{}
	for k, v := range h {
		out[k] = v
	}
	return out
}

// stdioOrHTTP builds the common {command,args} / {url,headers} entry, with extra keys
// per form.
func stdioOrHTTP(urlKey string, stdioExtra, httpExtra map[string]any) func(Server) map[string]any {
	return func(s Server) map[string]any {
		e := map[string]any{}
		if s.IsHTTP() {
			e[urlKey] = s.URL
			if len(s.Headers) > 0 {
				e["headers"] = headersAny(s.Headers)
			}
			for k, v := range httpExtra {
				e[k] = v
			}
			return e
		}
		e["command"] = s.Command
		e["args"] = append([]string{}, s.Args...)
		for k, v := range stdioExtra {
			e[k] = v
		}
		return e
	}
}

func insertAfterProgram(argv []string, extra ...string) []string {
	out := append([]string{argv[0]}, extra...)
	return append(out, argv[1:]...)
}

// ExecutionTokenEnv is the environment variable toolgate run uses to hand a bearer token
// to harnesses that read it from the environment rather than the command line.
const ExecutionTokenEnv = "TOOLGATE_EXECUTION_TOKEN"

var claudeRule = NameRule{
	Display: mcpUnderscore,
	MaxLen:  64,
	Summary: "mcp__<server>__<tool>, characters outside [A-Za-z0-9_-] shown as '_', at most 64 characters in all",
}

var (
	_ = register(jsonKind(&Harness{
		ID: "claude-code", Title: "Claude Code", FileName: ".mcp.json", Format: FormatJSON,
		DefaultPath: cwdPath(".mcp.json"), ProjectFile: ".mcp.json", PathDoc: "./.mcp.json (project scope)",
		Names: claudeRule,
		launch: func(argv []string, file string, s Server) (Launch, error) {
			// One argument: --mcp-config is variadic and would swallow a following prompt.
			return Launch{Args: insertAfterProgram(argv, "--mcp-config="+file)}, nil
		},
		LaunchDoc: "inserts --mcp-config=FILE after the program name (one argument: the flag takes several values)",
	}, []string{"mcpServers"}, claudeEntry, nil))

	_ = register(&Harness{
		ID: "claude-agent-sdk", Title: "Claude Agent SDK", FileName: "claude-agent-sdk-options.json", Format: FormatJSON,
		NoConnect: true, PathDoc: "none: pass the object as the SDK's query options (mcpServers, allowedTools)",
		Names: claudeRule,
		render: func(s Server) ([]byte, error) {
			return jsonFile([]string{"mcpServers", s.ServerName()}, claudeEntry(s), map[string]any{
				"allowedTools": []string{"mcp__" + sanitize(s.ServerName()) + "__*"},
			})
		},
		merge: func([]byte, Server) ([]byte, error) {
			return nil, fmt.Errorf("harness: the Claude Agent SDK takes its options in code; print them with toolgate config")
		},
		parse: func(content []byte, name string) (map[string]any, error) {
			return jsonEntry(content, false, []string{"mcpServers", name})
		},
	})

	_ = register(jsonKind(&Harness{
		ID: "claude-desktop", Title: "Claude Desktop", FileName: "claude_desktop_config.json", Format: FormatJSON,
		DefaultPath: claudeDesktopPath,
		PathDoc:     "~/Library/Application Support/Claude/claude_desktop_config.json (macOS), %APPDATA%\\Claude\\claude_desktop_config.json (Windows), ~/.config/Claude/claude_desktop_config.json (Linux)",
		StdioOnly:   true,
		Names: NameRule{
			Display: func(_, tool string) string { return tool },
			MaxLen:  64, Chars: isSafe,
			Summary: "the tool name as published; the Anthropic API accepts ^[A-Za-z0-9_-]{1,64}$",
		},
	}, []string{"mcpServers"}, stdioOrHTTP("url", nil, nil), nil))

	_ = register(jsonKind(&Harness{
		ID: "cursor", Title: "Cursor", FileName: "mcp.json", Format: FormatJSON,
		DefaultPath: homePath(".cursor", "mcp.json"), ProjectFile: ".cursor/mcp.json", PathDoc: "~/.cursor/mcp.json (global; a project uses .cursor/mcp.json)",
		Names: NameRule{
			Display: func(_, tool string) string { return tool },
			// Cursor filters out a tool whose server name plus tool name reaches 60
			// ("Combined server and tool name length (60) exceeds 60 characters").
			MaxLen: 59, Chars: isSafe,
			Length:  func(server, tool string) int { return len(server) + len(tool) },
			Summary: "the tool name as published; server name plus tool name under 60 characters, [A-Za-z0-9_-] only",
		},
	}, []string{"mcpServers"}, stdioOrHTTP("url", nil, nil), nil))

	_ = register(jsonKind(&Harness{
		ID: "gemini", Title: "Gemini CLI", FileName: "settings.json", Format: FormatJSONC,
		DefaultPath: homePath(".gemini", "settings.json"), ProjectFile: ".gemini/settings.json", PathDoc: "~/.gemini/settings.json (a project uses .gemini/settings.json)",
		Names: NameRule{
			Display: geminiName, MaxLen: 63,
			Summary: "mcp_<server>_<tool>, characters outside [A-Za-z0-9_.:-] shown as '_', longer than 63 characters is cut in the middle with \"...\"",
		},
		launch: func(argv []string, file string, s Server) (Launch, error) {
			return Launch{Args: argv, Env: []string{"GEMINI_CLI_SYSTEM_SETTINGS_PATH=" + file}}, nil
		},
		LaunchDoc: "sets GEMINI_CLI_SYSTEM_SETTINGS_PATH=FILE (system settings, merged over user and project settings)",
	}, []string{"mcpServers"}, stdioOrHTTP("httpUrl", nil, nil), nil))

	_ = register(jsonKind(&Harness{
		ID: "vscode", Title: "VS Code", FileName: "mcp.json", Format: FormatJSONC,
		DefaultPath: cwdPath(".vscode", "mcp.json"), ProjectFile: ".vscode/mcp.json", PathDoc: "./.vscode/mcp.json (workspace)",
		Names: NameRule{
			Display: func(server, tool string) string { return "mcp_" + sanitize(server) + "_" + tool },
			MaxLen:  64, Chars: isSafe,
			Summary: "mcp_<server>_<tool>; Copilot rejects '.', and the whole name must stay within 64 characters",
		},
	}, []string{"servers"}, func(s Server) map[string]any {
		if s.IsHTTP() {
			return stdioOrHTTP("url", nil, map[string]any{"type": "http"})(s)
		}
		return stdioOrHTTP("url", map[string]any{"type": "stdio"}, nil)(s)
	}, nil))

	_ = register(jsonKind(&Harness{
		ID: "opencode", Title: "opencode", FileName: "opencode.json", Format: FormatJSONC,
		DefaultPath: configHomePath("opencode", "opencode.json"), ProjectFile: "opencode.json", PathDoc: "~/.config/opencode/opencode.json (a project uses ./opencode.json)",
		Names: NameRule{
			Display: func(server, tool string) string { return sanitize(server) + "_" + sanitize(tool) },
			MaxLen:  64,
			Summary: "<server>_<tool>, characters outside [A-Za-z0-9_-] shown as '_', at most 64 characters (model provider limit)",
		},
		launch: func(argv []string, file string, s Server) (Launch, error) {
			return Launch{Args: argv, Env: []string{"OPENCODE_CONFIG=" + file}}, nil
		},
		LaunchDoc: "sets OPENCODE_CONFIG=FILE (merged over the user's configuration)",
	}, []string{"mcp"}, func(s Server) map[string]any {
		if s.IsHTTP() {
			e := map[string]any{"type": "remote", "url": s.URL, "enabled": true}
			if len(s.Headers) > 0 {
				e["headers"] = headersAny(s.Headers)
			}
			return e
		}
		return map[string]any{"type": "local", "command": append([]string{s.Command}, s.Args...), "enabled": true}
	}, map[string]any{"$schema": "https://opencode.ai/config.json"}))

	_ = register(jsonKind(&Harness{
		ID: "pi", Title: "Pi (pi-mcp-adapter)", FileName: ".mcp.json", Format: FormatJSONC,
		DefaultPath: homePath(".config", "mcp", "mcp.json"), ProjectFile: ".mcp.json", PathDoc: "~/.config/mcp/mcp.json (all projects; a project uses ./.mcp.json)",
		Names: NameRule{
			Display: func(server, tool string) string {
				return piServerPrefix(server) + "_" + strings.ReplaceAll(tool, ".", "_")
			},
			MaxLen: 64, Chars: safeOrDot,
			Summary: "<server>_<tool> with '.' shown as '_' (pi-mcp-adapter's default \"server\" prefix); other characters pass through, so they must be [A-Za-z0-9_-]; at most 64",
		},
		launch: func(argv []string, file string, s Server) (Launch, error) {
			return Launch{Args: insertAfterProgram(argv, "--mcp-config", file)}, nil
		},
		LaunchDoc: "inserts --mcp-config FILE (pi-mcp-adapter's flag) after the program name",
	}, []string{"mcpServers"}, func(s Server) map[string]any {
		if s.IsHTTP() {
			e := map[string]any{"url": s.URL, "lifecycle": "eager"}
			rest := map[string]string{}
			for k, v := range s.Headers {
				rest[k] = v
			}
			if tok, ok := s.bearer(); ok {
				e["auth"], e["bearerToken"] = "bearer", tok
				for k := range rest {
					if strings.EqualFold(k, "authorization") {
						delete(rest, k)
					}
				}
			}
			if len(rest) > 0 {
				e["headers"] = headersAny(rest)
			}
			return e
		}
		return map[string]any{"command": s.Command, "args": append([]string{}, s.Args...), "lifecycle": "eager"}
	}, nil))

	_ = register(&Harness{
		ID: "codex", Title: "Codex", FileName: "config.toml", Format: FormatTOML,
		DefaultPath: func() (string, error) {
			if h := os.Getenv("CODEX_HOME"); h != "" {
				return h + string(os.PathSeparator) + "config.toml", nil
			}
			return homePath(".codex", "config.toml")()
		},
		ProjectFile: ".codex/config.toml", PathDoc: "$CODEX_HOME/config.toml, default ~/.codex/config.toml",
		Names: NameRule{Display: mcpUnderscore, MaxLen: 64, Summary: claudeRule.Summary},
		render: func(s Server) ([]byte, error) {
			return tomlBlock(s.ServerName(), codexEntry(s))
		},
		merge: func(existing []byte, s Server) ([]byte, error) {
			return mergeTOML(existing, s.ServerName(), codexEntry(s))
		},
		parse: tomlEntry,
		launch: func(argv []string, file string, s Server) (Launch, error) {
			var extra []string
			var env []string
			prefix := "mcp_servers." + s.ServerName() + "."
			add := func(key string, v any) error {
				val, err := tomlInline(v)
				if err != nil {
					return err
				}
				extra = append(extra, "-c", prefix+key+"="+val)
				return nil
			}
			if s.IsHTTP() {
				if err := add("url", s.URL); err != nil {
					return Launch{}, err
				}
				if tok, ok := s.bearer(); ok {
					if err := add("bearer_token_env_var", ExecutionTokenEnv); err != nil {
						return Launch{}, err
					}
					env = append(env, ExecutionTokenEnv+"="+tok)
				}
			} else {
				if err := add("command", s.Command); err != nil {
					return Launch{}, err
				}
				if err := add("args", append([]string{}, s.Args...)); err != nil {
					return Launch{}, err
				}
			}
			return Launch{Args: insertAfterProgram(argv, extra...), Env: env}, nil
		},
		LaunchDoc: "inserts -c mcp_servers.<name>.<key>=<value> overrides after the program name; an HTTP token travels in TOOLGATE_EXECUTION_TOKEN via bearer_token_env_var, never on the command line",
	})

	_ = register(&Harness{
		ID: "goose", Title: "Goose", FileName: "config.yaml", Format: FormatYAML,
		DefaultPath: configHomePath("goose", "config.yaml"), PathDoc: "~/.config/goose/config.yaml",
		Names: NameRule{
			Display: func(server, tool string) string { return strings.ToLower(sanitize(server)) + "__" + tool },
			MaxLen:  64, Chars: isSafe,
			Summary: "<extension>__<tool>; Goose passes the tool name to the provider unchanged, so [A-Za-z0-9_-] only, at most 64",
		},
		render: func(s Server) ([]byte, error) {
			return mergeYAMLMap([]byte("{}\n"), []string{"extensions", s.ServerName()}, gooseEntry(s))
		},
		merge: func(existing []byte, s Server) ([]byte, error) {
			return mergeYAMLMap(existing, []string{"extensions", s.ServerName()}, gooseEntry(s))
		},
		parse: func(content []byte, name string) (map[string]any, error) {
			return yamlLookup(content, []string{"extensions", name})
		},
	})

	_ = register(&Harness{
		ID: "deepseek", Title: "DeepSeek Harness (dsh)", FileName: "cordis.patch.yml", Format: FormatYAML,
		DefaultPath: cwdPath("cordis.patch.yml"), ProjectFile: "cordis.patch.yml", PathDoc: "./cordis.patch.yml (the overlay passed with dsh --patch)",
		Names: NameRule{
			Display: mcpUnderscore, MaxLen: 64, Chars: isSafe,
			Summary: "mcp__<server>__<tool>; dsh rewrites names outside [A-Za-z0-9_-] with its own hash, so toolgate publishes safe names itself; at most 64",
		},
		render: func(s Server) ([]byte, error) { return mergeDeepseek(nil, s) },
		merge:  mergeDeepseek,
		parse:  deepseekEntry,
		launch: func(argv []string, file string, s Server) (Launch, error) {
			return Launch{Args: insertAfterProgram(argv, "--patch", file)}, nil
		},
		LaunchDoc: "inserts --patch FILE after the program name",
	})
)

func claudeEntry(s Server) map[string]any {
	if s.IsHTTP() {
		return stdioOrHTTP("url", nil, map[string]any{"type": "http"})(s)
	}
	return stdioOrHTTP("url", map[string]any{"type": "stdio"}, nil)(s)
}

func codexEntry(s Server) map[string]any {
	if s.IsHTTP() {
		e := map[string]any{"url": s.URL}
		if len(s.Headers) > 0 {
			e["http_headers"] = headersAny(s.Headers)
		}
		return e
	}
	return map[string]any{"command": s.Command, "args": append([]string{}, s.Args...)}
}

func gooseEntry(s Server) map[string]any {
	e := map[string]any{
		"name": s.ServerName(), "enabled": true, "timeout": 300,
		"description": "toolgate: the tools your grants permit",
	}
	if s.IsHTTP() {
		e["type"] = "streamable_http"
		e["uri"] = s.URL
		if len(s.Headers) > 0 {
			e["headers"] = headersAny(s.Headers)
		}
		return e
	}
	e["type"] = "stdio"
	e["cmd"] = s.Command
	e["args"] = append([]string{}, s.Args...)
	e["envs"] = map[string]any{}
	return e
}

// tomlInline renders one TOML value the way Codex's -c parses it.
func tomlInline(v any) (string, error) {
	b, err := tomlBlockValue(v)
	if err != nil {
		return "", err
	}
	return b, nil
}

// deepseekID is the plugin entry id toolgate's server uses in a dsh overlay.
func deepseekID(name string) string { return "mcp-" + name }

func deepseekConfig(s Server) map[string]any {
	c := map[string]any{"serverName": s.ServerName(), "failOnStartupError": true}
	if s.IsHTTP() {
		c["transport"] = "streamable-http"
		c["url"] = s.URL
		if len(s.Headers) > 0 {
			c["headers"] = headersAny(s.Headers)
		}
	} else {
		c["transport"] = "stdio"
		c["command"] = s.Command
		c["args"] = append([]string{}, s.Args...)
	}
	return c
}

// mergeDeepseek adds or replaces toolgate's "- insert: [{id: mcp-<name>, …}]" layer in a
// dsh patch overlay (a YAML sequence of patch entries).
func mergeDeepseek(existing []byte, s Server) ([]byte, error) {
	item := map[string]any{"insert": []any{map[string]any{
		"id": deepseekID(s.ServerName()), "name": "@deepseek-ai/dsh-mcp-client", "config": deepseekConfig(s),
	}}}
	node, err := toNode(item)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(existing)) == 0 {
		return encodeYAML(&yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.SequenceNode, Tag: "!!seq", Content: []*yaml.Node{node}}}})
	}
	doc, err := parseYAMLDoc(existing)
	if err != nil {
		return nil, err
	}
	seq := doc.Content[0]
	if seq.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("invalid dsh patch: the top level must be a list of patch entries")
	}
	idx := deepseekIndex(seq, s.ServerName())
	if idx >= 0 {
		old := seq.Content[idx]
		node.HeadComment, node.LineComment, node.FootComment = old.HeadComment, old.LineComment, old.FootComment
		seq.Content[idx] = node
	} else {
		seq.Content = append(seq.Content, node)
	}
	return encodeYAML(doc)
}

// deepseekIndex finds the top-level patch entry that inserts toolgate's plugin.
func deepseekIndex(seq *yaml.Node, name string) int {
	for i, it := range seq.Content {
		if it.Kind != yaml.MappingNode {
			continue
		}
		ins, _ := mapGet(it, "insert")
		if ins == nil || ins.Kind != yaml.SequenceNode {
			continue
		}
		for _, e := range ins.Content {
			if e.Kind != yaml.MappingNode {
				continue
			}
			if id, _ := mapGet(e, "id"); id != nil && id.Value == deepseekID(name) {
				return i
			}
		}
	}
	return -1
}

func deepseekEntry(content []byte, name string) (map[string]any, error) {
	doc, err := parseYAMLDoc(content)
	if err != nil {
		return nil, err
	}
	seq := doc.Content[0]
	if seq.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("invalid dsh patch: the top level must be a list of patch entries")
	}
	i := deepseekIndex(seq, name)
	if i < 0 {
		return nil, fmt.Errorf("no insert entry with id %s in the patch", deepseekID(name))
	}
	var item struct {
		Insert []map[string]any `yaml:"insert"`
	}
	if err := seq.Content[i].Decode(&item); err != nil {
		return nil, fmt.Errorf("reading the patch entry: %w", err)
	}
	for _, e := range item.Insert {
		if e["id"] == deepseekID(name) {
			return e, nil
		}
	}
	return nil, fmt.Errorf("no insert entry with id %s in the patch", deepseekID(name))
}
