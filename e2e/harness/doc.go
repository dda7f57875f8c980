// Package harness holds end-to-end tests that point real harness CLIs (Claude Code,
// Codex, Gemini CLI, opencode, pi-mcp-adapter, the MCP Inspector) at the toolgate binary
// through the files `toolgate config` and `toolgate connect` write, and drive
// `toolgate run` turns. Every harness runs model-free, with a private HOME.
package harness
