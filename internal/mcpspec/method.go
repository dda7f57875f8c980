package mcpspec

// Methods and notifications, by the names both sides send. A server dispatches on
// them and a client sends them; neither spells them out on its own.
const (
	MethodInitialize = "initialize"
	MethodPing       = "ping"
	// MethodServerDiscover is the stateless revision's capability query.
	MethodServerDiscover = "server/discover"

	MethodToolsList = "tools/list"
	MethodToolsCall = "tools/call"

	MethodResourcesList          = "resources/list"
	MethodResourcesTemplatesList = "resources/templates/list"
	MethodResourcesRead          = "resources/read"
	MethodResourcesSubscribe     = "resources/subscribe"
	MethodResourcesUnsubscribe   = "resources/unsubscribe"

	MethodPromptsList = "prompts/list"
	MethodPromptsGet  = "prompts/get"

	MethodCompletionComplete = "completion/complete"
	MethodLoggingSetLevel    = "logging/setLevel"

	// Server-to-client requests (a tool's Peer sends them).
	MethodElicitationCreate     = "elicitation/create"
	MethodSamplingCreateMessage = "sampling/createMessage"
	MethodRootsList             = "roots/list"

	NotificationInitialized          = "notifications/initialized"
	NotificationCancelled            = "notifications/cancelled"
	NotificationProgress             = "notifications/progress"
	NotificationMessage              = "notifications/message"
	NotificationToolsListChanged     = "notifications/tools/list_changed"
	NotificationResourcesListChanged = "notifications/resources/list_changed"
	NotificationResourceUpdated      = "notifications/resources/updated"
	NotificationPromptsListChanged   = "notifications/prompts/list_changed"
	NotificationRootsListChanged     = "notifications/roots/list_changed"
)

// CapabilityFor names the client capability a server-to-client request needs
// ("elicitation", "sampling", "roots"), or "" for one that needs none (ping).
func CapabilityFor(method string) string {
	switch method {
	case MethodElicitationCreate:
		return "elicitation"
	case MethodSamplingCreateMessage:
		return "sampling"
	case MethodRootsList:
		return "roots"
	}
	return ""
}
