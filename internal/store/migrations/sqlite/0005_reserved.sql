-- 0005: reserved for the installed MCP servers' tables (workspaces, mcp_servers,
-- mcp_catalogs, mcp_bindings), which are merged separately; this empty migration keeps
-- the versions consecutive until then and is replaced by that one.
SELECT 1;
