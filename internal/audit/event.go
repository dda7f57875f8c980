// Package audit records one append-only event per kernel decision. Events are
// hash-chained (each carries the hash of the one before), so an edited, inserted or
// deleted event is detected by Verify; argument values that may be secret are stored
// only as HMACs under a per-installation key.
package audit

import "time"

// Decision is what the kernel decided for one call.
type Decision string

const (
	Allowed   Decision = "allowed"
	Denied    Decision = "denied"
	Failed    Decision = "failed"
	Escalated Decision = "escalated"
)

// Event is one decision. Seq, PrevHash and Hash are assigned by the log on append.
type Event struct {
	Seq       int64     `json:"seq"`
	Time      time.Time `json:"time"`
	CallID    string    `json:"call_id"`
	TurnID    string    `json:"turn_id,omitempty"`
	Principal string    `json:"principal"`
	Transport string    `json:"transport,omitempty"`
	// Tool is the canonical id; Alias is the harness display name, for diagnosis only.
	Tool     string   `json:"tool"`
	Alias    string   `json:"alias,omitempty"`
	Action   string   `json:"action,omitempty"`
	Resource string   `json:"resource,omitempty"`
	Decision Decision `json:"decision"`
	// GrantID is the grant that decided (allowed or explicitly denied), if any.
	GrantID string `json:"grant_id,omitempty"`
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
	// LatencyMicros is the time from call receipt to this decision/outcome.
	LatencyMicros int64 `json:"latency_us"`
	// Args holds argument values as HMAC-SHA256 hex under the installation key, keyed
	// by top-level argument name; never clear values.
	Args     map[string]string `json:"args,omitempty"`
	PrevHash string            `json:"prev_hash"`
	Hash     string            `json:"hash"`
}
