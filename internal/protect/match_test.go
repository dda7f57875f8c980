package protect

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMatch(t *testing.T) {
	cases := map[string]string{ // path → protected root ("" = not protected)
		// git, whole tree, in any directory
		".git": ".git", ".git/HEAD": ".git", ".git/refs/heads/main": ".git", ".git/objects/ab/cd": ".git",
		".git/config": ".git", ".git/hooks/pre-commit": ".git", "sub/.git/config": "sub/.git",
		".gitattributes": ".gitattributes", "src/.gitattributes": "src/.gitattributes", ".gitmodules": ".gitmodules",
		".husky/pre-commit": ".husky", ".githooks/pre-push": ".githooks", ".pre-commit-config.yaml": ".pre-commit-config.yaml",
		"lefthook.yml": "lefthook.yml", ".lefthook/pre-commit/x.sh": ".lefthook",
		// harnesses
		".mcp.json": ".mcp.json", "sub/.mcp.json": "sub/.mcp.json", ".claude/settings.json": ".claude",
		".claude/settings.local.json": ".claude", ".claude/commands/x.md": ".claude", ".claude/agents/a.md": ".claude",
		".cursor/mcp.json": ".cursor", ".cursor/rules/r.mdc": ".cursor", ".gemini/settings.json": ".gemini",
		".codex/config.toml": ".codex", "opencode.json": "opencode.json", "opencode.jsonc": "opencode.jsonc",
		"cordis.patch.yml": "cordis.patch.yml", ".aider.conf.yml": ".aider.conf.yml",
		// editors and shells
		".vscode/settings.json": ".vscode", ".vscode/tasks.json": ".vscode", ".vscode/launch.json": ".vscode",
		".vscode/mcp.json": ".vscode", "w.code-workspace": "w.code-workspace", ".idea/workspace.xml": ".idea",
		".devcontainer/devcontainer.json": ".devcontainer", ".devcontainer.json": ".devcontainer.json",
		".envrc": ".envrc", "sub/.envrc": "sub/.envrc", "mise.toml": "mise.toml", ".config/mise/config.toml": ".config/mise",
		".config/mise.toml": ".config/mise.toml",
		// toolgate
		".agents/tools/main/x.json": ".agents/tools", ".agents/tools": ".agents/tools", ".toolgate/x": ".toolgate",
		// toolgate connect's backup and state beside a protected file
		".mcp.json.toolgate-backup": ".mcp.json.toolgate-backup", "opencode.json.toolgate-state.json": "opencode.json.toolgate-state.json",
		// not protected: ordinary project files, prompts, CI, build definitions
		"README.md": "", "Makefile": "", "package.json": "", ".npmrc": "", ".github/workflows/ci.yml": "",
		"AGENTS.md": "", "CLAUDE.md": "", ".cursorrules": "", ".env": "", ".gitignore": "", ".editorconfig": "",
		".agents": "", ".agents/skills/x.md": "", "src/.agents/tools/x": "", ".config/other": "", ".config": "",
		"gitattributes": "", "x.git": "", "git": "", ".gitx/config": "", "vscode/settings.json": "",
		"notes.toolgate-backup": "", ".": "", "a~1": "", "README~1.TXT": "",
		// spellings a file system might take for the same name
		".GIT/config": ".GIT", ".Git/HEAD": ".Git", ".git./config": ".git.", ".git /config": ".git ",
		".git. . /config": ".git. . ", ".g\u200cit/config": ".g\u200cit", "\ufeff.git/config": "\ufeff.git",
		".git\u200d/hooks/x": ".git\u200d", ".VSCode/settings.json": ".VSCode", ".MCP.JSON": ".MCP.JSON",
		".hu\u017f\u212ay/pre-commit": ".hu\u017f\u212ay", // long s and Kelvin sign fold to s and k
		".git/con\ufb01g":             ".git", ".pre-commit-con\ufb01g.yaml": ".pre-commit-con\ufb01g.yaml",
		"GIT~1/config": "GIT~1", "git~1/hooks/x": "git~1", "VSCODE~1/tasks.json": "VSCODE~1", "MCP~1.JSO": "MCP~1.JSO",
		"PRE-CO~1.YAM": "PRE-CO~1.YAM", "W~1.COD": "W~1.COD", ".Agents/Tools/x": ".Agents/Tools",
		// cleaning
		"./.git/config": ".git", ".git//config": ".git", "sub/./.vscode/x": "sub/.vscode",
	}
	for p, want := range cases {
		root, ok := Match(p)
		if ok != (want != "") || root != want {
			t.Errorf("Match(%q) = %q, %v; want %q", p, root, ok, want)
		}
	}
}

func TestFold(t *testing.T) {
	for in, want := range map[string]string{
		".GIT": ".git", ".git...": ".git", ".git  ": ".git", "A\u200bB": "ab", "stra\u00dfe": "strasse",
		"\u212a": "k", "\u017f": "s", "\u00c9": "\u00e9", "x\xffy": "x\xffy", "": "", "...": "",
	} {
		if got := Fold(in); got != want {
			t.Errorf("Fold(%q) = %q; want %q", in, got, want)
		}
	}
}

func TestEntriesAreWellFormed(t *testing.T) {
	seen := map[string]bool{}
	for _, e := range Entries {
		if e.Name == "" || strings.HasPrefix(e.Name, "/") || strings.HasSuffix(e.Name, "/") || e.ReadBy == "" {
			t.Errorf("entry %+v", e)
		}
		if f := Fold(e.Name); seen[f] {
			t.Errorf("entry %q is listed twice", e.Name)
		} else {
			seen[f] = true
		}
		if !IsProtected(strings.ReplaceAll(e.Name, "*", "x")) {
			t.Errorf("entry %q does not match itself", e.Name)
		}
	}
}

func FuzzMatch(f *testing.F) {
	for _, s := range []string{".git/config", "a/.GIT./x", "GIT~1", ".vscode", "x/y/z", "\u212a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		root, ok := Match(p)
		if !ok {
			return
		}
		// The root is a prefix of the cleaned path and protected itself.
		if !IsProtected(root) {
			t.Errorf("Match(%q) root %q is not protected", p, root)
		}
	})
}

// docs/toolgate-mcp.md lists every entry (as `name`), so the list and its
// documentation cannot drift apart.
func TestEntriesDocumented(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "toolgate-mcp.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "### Protected paths")
	if i < 0 {
		t.Fatal("docs/toolgate-mcp.md has no Protected paths section")
	}
	section := doc[i:]
	if j := strings.Index(section[4:], "\n## "); j >= 0 {
		section = section[:j+4]
	}
	for _, e := range Entries {
		if !strings.Contains(section, "`"+e.Name+"`") {
			t.Errorf("%s is not listed in docs/toolgate-mcp.md#protected-paths", e.Name)
		}
	}
}
