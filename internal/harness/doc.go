// Package harness turns "point this harness at toolgate" into the exact file each agent
// harness reads (Claude Code, Codex, DeepSeek, Pi, Claude Desktop, Cursor, Goose, Gemini
// CLI, VS Code, opencode, the Claude Agent SDK), merges that entry into a user's existing
// file without disturbing anything else in it, and reproduces the names each harness
// shows a model so that a canonical tool id that would break a harness's naming rules
// is published under a stable short form instead.
//
// Everything here is pure: no network, no kernel. Files are built with real encoders
// (encoding/json, go-toml/v2, yaml.v3); the only text splicing is the deliberate one that
// keeps a user's comments and the bytes of every other entry exactly as they were.
package harness
