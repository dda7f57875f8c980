// Package fixturedata holds the JSON the test upstreams send byte for byte,
// shared by the stdio fixture and the HTTP test server so tests can compare
// what a connection returned with what the server wrote.
package fixturedata

// AwkwardTool is a tool definition holding what typed SDKs rewrite or drop:
// numbers as written (1.50, 1e2, a 20-digit integer), $schema and $defs,
// unknown members at every level.
const AwkwardTool = `{"name":"awkward","description":"numbers as written: 1.50, 1e2","inputSchema":{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"n":{"type":"number","default":1.50,"maximum":1e2,"multipleOf":0.10},"big":{"type":"integer","default":12345678901234567890},"ref":{"$ref":"#/$defs/thing"}},"$defs":{"thing":{"type":"string","x-vendor":{"nested":[1.0,2.50]}}},"required":["n"]},"annotations":{"readOnlyHint":true},"execution":{"taskSupport":"optional"},"x-unknown-field":{"keep":"me"}}`

// AwkwardResult is the awkward tool's result: an unknown content type, HTML
// characters, numbers as written, an unknown top-level member.
const AwkwardResult = `{"content":[{"type":"futureType","data":"x","extraField":1.50},{"type":"text","text":"<b>&amp;</b>"}],"structuredContent":{"n":1.50,"big":12345678901234567890},"extraTop":1e2,"isError":false}`

// ServerInfo is the servers' serverInfo, with an unknown member.
const ServerInfo = `{"name":"toolgate-fixture","version":"1.0.0","x-extra":1.50}`

// Capabilities are the servers' default capabilities, with an unknown one.
const Capabilities = `{"tools":{"listChanged":true},"resources":{"listChanged":true},"prompts":{"listChanged":true},"logging":{},"experimentalX":{"keep":true}}`
