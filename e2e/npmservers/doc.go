// Package npmservers runs real MCP servers from npm (the official server-everything,
// server-memory and server-filesystem) as upstreams of the real toolgate binary:
// installed with `toolgate install`, granted, called through `toolgate serve`'s /mcp
// and through `toolgate mcp` over stdio, and stopped with nothing left behind.
package npmservers
