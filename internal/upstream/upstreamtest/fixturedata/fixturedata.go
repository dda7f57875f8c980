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

// AwkwardResources is the fixture's resources/list answer with -awkward-items: a
// resource whose members typed SDKs rewrite (numbers as written, an unknown member,
// HTML characters, a JSON Schema in _meta with $ref and $defs).
const AwkwardResources = `{"resources":[{"uri":"fixture://awkward","name":"awkward","mimeType":"text/plain","size":1e2,"annotations":{"priority":1.50,"x-vendor":"<b>&amp;</b>"},"_meta":{"schema":{"$schema":"https://json-schema.org/draft/2020-12/schema","$ref":"#/$defs/a","$defs":{"a":{"type":"number","default":1.50,"additionalProperties":false}}}},"x-unknown":{"keep":[1.0,2.50]}}]}`

// AwkwardTemplates is the resources/templates/list answer with -awkward-items.
const AwkwardTemplates = `{"resourceTemplates":[{"uriTemplate":"fixture://items/{id}","name":"item","x-unknown":1e2}]}`

// AwkwardRead is the resources/read answer with -awkward-items: an unknown content
// member and type, numbers as written, HTML characters.
const AwkwardRead = `{"contents":[{"uri":"fixture://awkward","mimeType":"text/plain","text":"<b>&amp;</b> 1.50","x-extra":1e2},{"uri":"fixture://awkward","type":"futureType","blob":"AA=="}],"extraTop":1.50}`

// AwkwardPrompts is the prompts/list answer with -awkward-items.
const AwkwardPrompts = `{"prompts":[{"name":"awkward","description":"1.50 <b>","arguments":[{"name":"n","required":true,"x-default":1e2}],"x-unknown":{"keep":true}}]}`

// AwkwardPrompt is the prompts/get answer with -awkward-items: an unknown content
// type among the messages.
const AwkwardPrompt = `{"description":"awkward","messages":[{"role":"user","content":{"type":"futureType","data":"x","extraField":1.50}},{"role":"assistant","content":{"type":"text","text":"<b>&amp;</b>"}}],"x-extra":1e2}`

// AwkwardCompletion is the completion/complete answer with -awkward-items.
const AwkwardCompletion = `{"completion":{"values":["1.50","<b>"],"total":1e2,"hasMore":false,"x-extra":true}}`
