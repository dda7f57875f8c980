package mcpspec

// ListKind names, as a bit set, the lists whose changes a server tells a client of
// (notifications/tools/list_changed and its siblings): what a surface asks a turn to
// watch and what the turn reports changed (docs/http-contract.md, "The GET stream").
type ListKind uint8

// The lists.
const (
	ToolsList ListKind = 1 << iota
	ResourcesList
	PromptsList
)
