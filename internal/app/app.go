// Package app wires toolgate's subsystems together (store, kernel, audit, tokens, local
// tools) for the CLI commands and end-to-end tests. It is the only package that knows
// them all; nothing below cli imports it.
package app

import (
	"context"
	"errors"

	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/mcpserver"
)

// Options configures one App.
type Options struct {
	// DataDir holds the embedded store; created owner-only on first use.
	DataDir string
	// Tools are extra tools to register (for example the local tools of a workspace).
	Tools []*kernel.Tool
}

// TurnRequest opens one turn.
type TurnRequest struct {
	// Principal whose grants decide the turn's catalogue and calls.
	Principal string
	// Transport is recorded in audit events ("stdio", "http", "api").
	Transport string
	// Namer maps a canonical tool id to the name published on this surface; nil
	// publishes canonical ids. It must be one-to-one over the catalogue.
	Namer func(canonicalID string) string
	// Alias, when set, reproduces the harness's display name for diagnosis only.
	Alias func(publishedName string) string
}

// Outcome is how a turn ended.
type Outcome string

const (
	OutcomeCompleted Outcome = "completed"
	OutcomeEscalated Outcome = "escalated"
	OutcomeFailed    Outcome = "failed"
)

// Turn is one open turn: a fixed catalogue, served by the MCP layer.
type Turn interface {
	mcpserver.Turn
	// ID is the turn's execution id.
	ID() string
	// Outcome reports how the turn has ended so far (completed unless it escalated or failed).
	Outcome() Outcome
	// Close ends the turn; later calls are refused.
	Close() error
}

// App is a running set of subsystems over one data directory.
type App struct {
	opts Options
}

// ErrNotWired is returned until the kernel wiring replaces this scaffold.
var ErrNotWired = errors.New("app: kernel not wired yet")

// Open opens (creating if needed) the data directory and its store.
func Open(ctx context.Context, opts Options) (*App, error) {
	return &App{opts: opts}, nil
}

// OpenTurn resolves a principal's catalogue once and returns the turn serving it.
func (a *App) OpenTurn(ctx context.Context, req TurnRequest) (Turn, error) {
	return nil, ErrNotWired
}

// MintToken issues an execution token identifying principal and session. It carries no
// authority: every call is still authorized against a grant.
func (a *App) MintToken(principal, session string, ttlSeconds int) (string, error) {
	return "", ErrNotWired
}

// VerifyToken checks an execution token and returns the principal it identifies.
func (a *App) VerifyToken(token string) (principal string, ok bool) { return "", false }

// Close releases the store.
func (a *App) Close() error { return nil }
