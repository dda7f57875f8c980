package store

import "fmt"

// Durability is how far a commit (an audit event above all) must have travelled before
// the call that wrote it returns. toolgate writes a call's audit event before the tool
// runs, so the level decides which failures can leave an executed call without its
// event. docs/performance.md measures both levels and says why process is the default.
type Durability string

const (
	// DurabilityProcess: a commit survives the toolgate process being killed (kill -9,
	// a crash, the OOM killer) the moment it returns, but not a power cut or kernel
	// panic, which can lose the last commits (the chain stays a verifiable prefix).
	// SQLite runs WAL with synchronous=NORMAL: the commit is in the OS page cache,
	// fsynced at checkpoints. PostgreSQL runs synchronous_commit=off: the commit is in
	// the server's WAL buffers, flushed within its wal_writer_delay, so it survives
	// toolgate's death but not the database server's.
	DurabilityProcess Durability = "process"
	// DurabilityPower: every commit is fsynced before it returns (SQLite
	// synchronous=FULL; PostgreSQL's synchronous_commit as the server has it, on by
	// default), so it survives a power cut. Group commit shares one fsync among the
	// calls that arrive together.
	DurabilityPower Durability = "power"
)

// DefaultDurability is the level used when none is chosen.
const DefaultDurability = DurabilityProcess

// ParseDurability accepts "process", "power", or "" (the default).
func ParseDurability(s string) (Durability, error) {
	switch d := Durability(s); d {
	case "":
		return DefaultDurability, nil
	case DurabilityProcess, DurabilityPower:
		return d, nil
	}
	return "", fmt.Errorf("audit durability %q: want %q or %q", s, DurabilityProcess, DurabilityPower)
}

// Option adjusts how a store is opened.
type Option func(*openOptions)

type openOptions struct {
	durability Durability
}

// WithDurability selects the durability level; an empty or unknown level leaves the
// default (callers validate user input with ParseDurability first).
func WithDurability(d Durability) Option {
	return func(o *openOptions) {
		if d == DurabilityProcess || d == DurabilityPower {
			o.durability = d
		}
	}
}

func collectOptions(opts []Option) openOptions {
	o := openOptions{durability: DefaultDurability}
	for _, f := range opts {
		f(&o)
	}
	return o
}

// Durability reports the level this store was opened with.
func (s *Store) Durability() Durability { return s.durability }
