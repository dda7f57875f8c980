// Package protect is toolgate's one list of protected workspace paths: the files and
// directories that make a program run code, or choose which program runs, when a
// person merely starts a harness or an editor in the workspace, enters it in a shell, or
// runs git there. Writing one would let an agent run code outside every sandbox the next
// time the person does something ordinary, so the file tools write them only under a
// grant that names them, git_checkout never lands them, and bash can neither change one
// nor leave one behind (docs/toolgate-mcp.md#protected-paths, docs/confinement.md).
//
// Where the line is: the project's own code and its build, test and CI definitions
// (Makefile, package.json, .npmrc, Cargo and Go files, Dockerfiles, .github/workflows,
// linter configs) are not protected. They run when the person builds, tests or ships the
// project, which runs the project's code anyway and is the work an agent is there to do;
// protecting them would protect the project from being worked on. Instruction files
// (AGENTS.md, CLAUDE.md, .cursorrules) are prompts, not programs, and are not protected
// either. A harness's own project directory (.claude, .cursor, .gemini, …) is protected
// whole: harnesses keep adding files there that run programs (hooks, MCP servers,
// plugins, commands), and a list of today's files would go stale.
//
// Matching never depends on the file system: every path element is compared folded the
// way a case-insensitive or normalising file system might see it (Unicode case folding,
// default-ignorable code points dropped, trailing dots and spaces dropped, and 8.3 short
// names), so ".GIT/config", ".git./config", ".g\u200cit/config" and "GIT~1/config" are
// all protected, on ext4 as on vfat or APFS.
package protect

// Entry is one protected path.
type Entry struct {
	// Name is one or more path elements ("/"-separated); an element may use the
	// wildcards of path.Match. Everything beneath a matching path is protected too.
	Name string
	// RootOnly entries are protected only at the workspace root; the others in every
	// directory (a harness, an editor or git may be started in a subdirectory).
	RootOnly bool
	// InPackages entries are checked inside bash within node_modules too. Elsewhere bash
	// checks every entry; inside node_modules only these, because packages ship the
	// others (npm's fast-uri ships a .gitattributes) and nobody starts a harness or an
	// editor in a package's directory, while a .git there is a repository of its own that
	// git and editors use as soon as a file in it is opened.
	InPackages bool
	// ReadBy says what acts on it (for the documentation).
	ReadBy string
}

// Entries is the list. docs/toolgate-mcp.md lists every Name (a test checks it).
var Entries = []Entry{
	// git
	{Name: ".git", InPackages: true, ReadBy: "git: config, hooks, HEAD, refs, objects, a gitdir pointer; a nested .git is a repository of its own"},
	{Name: ".gitattributes", ReadBy: "git: selects filter, diff and merge drivers"},
	{Name: ".gitmodules", ReadBy: "git: submodule URLs and paths"},
	{Name: ".githooks", ReadBy: "git, where core.hooksPath names it (the usual name)"},
	{Name: ".husky", ReadBy: "husky: git hooks (core.hooksPath=.husky/_)"},
	{Name: ".pre-commit-config.yaml", ReadBy: "pre-commit: hooks run on every git commit once installed"},
	{Name: "lefthook.yml", ReadBy: "lefthook: git hooks"},
	{Name: "lefthook.yaml", ReadBy: "lefthook"},
	{Name: ".lefthook.yml", ReadBy: "lefthook"},
	{Name: ".lefthook.yaml", ReadBy: "lefthook"},
	{Name: "lefthook-local.yml", ReadBy: "lefthook"},
	{Name: "lefthook-local.yaml", ReadBy: "lefthook"},
	{Name: ".lefthook-local.yml", ReadBy: "lefthook"},
	{Name: ".lefthook-local.yaml", ReadBy: "lefthook"},
	{Name: ".lefthook", ReadBy: "lefthook: hook scripts"},
	{Name: ".lefthook-local", ReadBy: "lefthook: hook scripts"},
	{Name: ".overcommit.yml", ReadBy: "overcommit: git hooks"},

	// harnesses (the project-level files toolgate connect knows are among them)
	{Name: ".mcp.json", ReadBy: "Claude Code, Pi: MCP servers started with the session"},
	{Name: ".claude", ReadBy: "Claude Code: settings(.local).json hooks, permissions and MCP approvals, commands, agents, skills"},
	{Name: ".cursor", ReadBy: "Cursor: mcp.json, hooks.json, environment.json, rules"},
	{Name: ".gemini", ReadBy: "Gemini CLI: settings.json (MCP servers, hooks), commands"},
	{Name: ".qwen", ReadBy: "Qwen Code: settings.json (MCP servers)"},
	{Name: ".codex", ReadBy: "Codex: project config.toml (MCP servers), hooks"},
	{Name: "opencode.json", ReadBy: "opencode: MCP servers"},
	{Name: "opencode.jsonc", ReadBy: "opencode"},
	{Name: ".opencode", ReadBy: "opencode: plugins, agents, commands"},
	{Name: ".continue", ReadBy: "Continue: MCP servers"},
	{Name: ".roo", ReadBy: "Roo Code: mcp.json"},
	{Name: ".kilocode", ReadBy: "Kilo Code: mcp.json"},
	{Name: ".amazonq", ReadBy: "Amazon Q Developer: mcp.json"},
	{Name: ".kiro", ReadBy: "Kiro: MCP settings, hooks"},
	{Name: ".junie", ReadBy: "Junie: MCP settings"},
	{Name: ".windsurf", ReadBy: "Windsurf: hooks, workflows"},
	{Name: ".aider.conf.yml", ReadBy: "aider: lint-cmd, test-cmd run automatically"},
	{Name: ".crush.json", ReadBy: "Crush: MCP servers, language servers"},
	{Name: "crush.json", ReadBy: "Crush"},
	{Name: "cordis.patch.yml", ReadBy: "DeepSeek dsh: the overlay toolgate connect writes (MCP plugin)"},

	// editors
	{Name: ".vscode", ReadBy: "VS Code: settings, tasks (runOn folderOpen), launch, mcp.json"},
	{Name: "*.code-workspace", ReadBy: "VS Code: workspace settings, tasks, launch"},
	{Name: ".idea", ReadBy: "JetBrains IDEs: run configurations, startup tasks"},
	{Name: ".fleet", ReadBy: "Fleet: run configurations"},
	{Name: ".zed", ReadBy: "Zed: settings (language servers), tasks"},
	{Name: ".helix", ReadBy: "Helix: languages.toml (language server commands)"},
	{Name: ".nvim.lua", ReadBy: "Neovim (exrc)"},
	{Name: ".nvimrc", ReadBy: "Neovim, Vim (exrc)"},
	{Name: ".exrc", ReadBy: "Vim, Neovim (exrc)"},
	{Name: ".dir-locals.el", ReadBy: "Emacs: directory-local variables (eval)"},
	{Name: ".dir-locals-2.el", ReadBy: "Emacs"},
	{Name: ".devcontainer", ReadBy: "Dev Containers: initializeCommand runs on the host"},
	{Name: ".devcontainer.json", ReadBy: "Dev Containers"},

	// shells
	{Name: ".envrc", ReadBy: "direnv: run on entering the directory"},
	{Name: "mise.toml", ReadBy: "mise: hooks on entering the directory, env scripts, tasks"},
	{Name: ".mise.toml", ReadBy: "mise"},
	{Name: "mise.local.toml", ReadBy: "mise"},
	{Name: ".mise.local.toml", ReadBy: "mise"},
	{Name: ".mise", ReadBy: "mise: config, tasks"},
	{Name: ".config/mise", ReadBy: "mise"},
	{Name: ".config/mise.toml", ReadBy: "mise"},

	// toolgate
	{Name: ".agents/tools", RootOnly: true, ReadBy: "toolgate mcp: declarative tools (the catalogue)"},
	{Name: ".toolgate", ReadBy: "toolgate"},
}

// connectSuffixes are the files toolgate connect keeps next to a harness file: undo
// copies the backup back, so a backup of a protected file is as good as the file.
var connectSuffixes = []string{".toolgate-backup", ".toolgate-state.json"}
