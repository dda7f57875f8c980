package mcpspec

// _meta keys of the stateless revision: every request carries its protocol version and
// the client's capabilities; a server names itself in its results.
const (
	MetaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	MetaServerInfo         = "io.modelcontextprotocol/serverInfo"
)

// toolgate's own _meta keys, on published tools, tools/list results and refusals
// (docs/kernel.md, docs/reason-codes.md).
const (
	MetaCatalogHash = "toolgate/catalogHash"
	MetaExecutionID = "toolgate/executionId"
	MetaNamespace   = "toolgate/namespace"
	MetaSource      = "toolgate/source"
	MetaStatus      = "toolgate/status"
	MetaCode        = "toolgate/code"
)

// JSON-RPC error codes of the stateless revision.
const (
	// CodeHeaderMismatch: an HTTP request's standard headers (MCP-Protocol-Version,
	// Mcp-Method, Mcp-Name) do not mirror its body.
	CodeHeaderMismatch = -32020
	// CodeMissingClientCapability: the request needs a client capability it did not
	// declare.
	CodeMissingClientCapability = -32021
	// CodeUnsupportedProtocolVersion: the request's revision is not served; the
	// error's data lists the supported ones.
	CodeUnsupportedProtocolVersion = -32022
)
