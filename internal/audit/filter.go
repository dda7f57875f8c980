package audit

import "time"

// Filter selects events from the log. Zero fields do not filter. Results are in
// ascending seq order.
type Filter struct {
	// AfterSeq returns only events with a greater seq (for paging and following).
	AfterSeq  int64
	Principal string
	// Tool is an exact canonical tool id.
	Tool     string
	Decision string
	CallID   string
	// Since is inclusive and Until exclusive.
	Since, Until time.Time
	// Resource is an exact resource ("mcp:NAME" for an upstream server's events).
	Resource string
	// Limit caps the number of events; 0 means no cap.
	Limit int
	// Last selects the Limit newest matching events instead of the oldest (still
	// returned in ascending seq order).
	Last bool
}
