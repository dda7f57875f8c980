package host

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"time"
)

// Catalog is what one server offers, kept as the upstream sent it: every item is the
// raw JSON object from its list answer, never decoded into a struct and re-encoded, so
// unknown fields and exact bytes survive. A Catalog handed out by the host is shared:
// callers must not modify it.
type Catalog struct {
	// Version grows by one each time the content changes (never when a refresh finds
	// the same content); it continues across restarts through the CatalogStore.
	Version uint64 `json:"version"`
	// Digest is sha256:<hex> over Info and the four lists (docs/host.md, "Catalogue").
	Digest    string    `json:"digest"`
	FetchedAt time.Time `json:"fetched_at"`
	// Info is the handshake of the connection the catalogue was fetched on: a restarted
	// toolgate can answer initialize from it before the upstream is started.
	Info              SessionInfo       `json:"info"`
	Tools             []json.RawMessage `json:"tools"`
	Resources         []json.RawMessage `json:"resources"`
	ResourceTemplates []json.RawMessage `json:"resource_templates"`
	Prompts           []json.RawMessage `json:"prompts"`
	// Truncated is set when the upstream offered more than CatalogPolicy allows (items,
	// bytes or pages); the lists hold what fit.
	Truncated bool `json:"truncated,omitempty"`
	// Dropped counts list items that were not JSON objects (and so were left out).
	Dropped int `json:"dropped,omitempty"`
}

// Counts are the list sizes of a catalogue (the management protocol's *_count fields).
type Counts struct {
	Tools             int `json:"tools_count"`
	Resources         int `json:"resources_count"`
	ResourceTemplates int `json:"resource_templates_count"`
	Prompts           int `json:"prompts_count"`
}

// Counts returns c's list sizes.
func (c *Catalog) Counts() Counts {
	if c == nil {
		return Counts{}
	}
	return Counts{len(c.Tools), len(c.Resources), len(c.ResourceTemplates), len(c.Prompts)}
}

// CatalogStore persists catalogues so a restarted toolgate answers lists at once. The
// host loads a server's catalogue when it is installed, saves it after each change and
// deletes it when the server is removed; it calls these without holding a lock, one
// call at a time per server. Implementations must be safe for concurrent use across
// servers.
type CatalogStore interface {
	// LoadCatalog returns the stored catalogue; ok is false when there is none.
	LoadCatalog(ctx context.Context, server string) (c Catalog, ok bool, err error)
	SaveCatalog(ctx context.Context, server string, c Catalog) error
	DeleteCatalog(ctx context.Context, server string) error
}

// kind is a set of catalogue lists.
type kind uint8

const (
	kindTools kind = 1 << iota
	kindResources
	kindTemplates
	kindPrompts
	allKinds = kindTools | kindResources | kindTemplates | kindPrompts
)

// lists describes how each list is fetched: its method, the result field holding the
// items, and the server capability that advertises it.
var lists = []struct {
	k          kind
	method     string
	capability string
}{
	{kindTools, "tools/list", "tools"},
	{kindResources, "resources/list", "resources"},
	{kindTemplates, "resources/templates/list", "resources"},
	{kindPrompts, "prompts/list", "prompts"},
}

// listChangedKinds maps an upstream notification to the lists it invalidates.
func listChangedKinds(method string) kind {
	switch method {
	case "notifications/tools/list_changed":
		return kindTools
	case "notifications/resources/list_changed":
		return kindResources | kindTemplates
	case "notifications/prompts/list_changed":
		return kindPrompts
	}
	return 0
}

func (c *Catalog) list(k kind) *[]json.RawMessage {
	switch k {
	case kindTools:
		return &c.Tools
	case kindResources:
		return &c.Resources
	case kindTemplates:
		return &c.ResourceTemplates
	default:
		return &c.Prompts
	}
}

// advertised reports which lists the server's capabilities object announces: a key
// present with a non-null value.
func advertised(caps json.RawMessage) kind {
	var m map[string]json.RawMessage
	if len(caps) == 0 || json.Unmarshal(caps, &m) != nil {
		return 0
	}
	var k kind
	for _, l := range lists {
		if v, ok := m[l.capability]; ok && !bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			k |= l.k
		}
	}
	return k
}

// listPage is one page of any list answer; only the field of the list asked for is read.
type listPage struct {
	Tools             []json.RawMessage `json:"tools"`
	Resources         []json.RawMessage `json:"resources"`
	ResourceTemplates []json.RawMessage `json:"resourceTemplates"`
	Prompts           []json.RawMessage `json:"prompts"`
	NextCursor        *string           `json:"nextCursor"`
}

// budget is what is left of CatalogPolicy's bounds while building one catalogue.
type budget struct {
	items, bytes, pages int
	truncated           bool
	dropped             int
}

// take reserves room for item; false when it does not fit.
func (b *budget) take(item json.RawMessage) bool {
	if b.items < 1 || b.bytes < len(item) {
		b.truncated = true
		return false
	}
	b.items--
	b.bytes -= len(item)
	return true
}

// errCursorLoop: an upstream answered a nextCursor it had already given.
var errCursorLoop = errors.New("nextCursor repeats an earlier cursor")

// fetchList reads every page of one list, within b.
func fetchList(ctx context.Context, s Session, method string, k kind, b *budget) ([]json.RawMessage, error) {
	var (
		out    []json.RawMessage
		params json.RawMessage
		seen   = map[string]bool{}
	)
	for pages := 0; ; pages++ {
		if pages >= b.pages {
			b.truncated = true
			return out, nil
		}
		res, err := s.Call(ctx, method, params, CallOptions{})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", method, err)
		}
		var p listPage
		if err := json.Unmarshal(res, &p); err != nil {
			return nil, fmt.Errorf("%s: result is not a list object: %w", method, err)
		}
		tmp := Catalog{Tools: p.Tools, Resources: p.Resources, ResourceTemplates: p.ResourceTemplates, Prompts: p.Prompts}
		for _, item := range *tmp.list(k) {
			if len(item) == 0 || item[0] != '{' {
				b.dropped++
				continue
			}
			if !b.take(item) {
				return out, nil
			}
			out = append(out, item)
		}
		if p.NextCursor == nil || *p.NextCursor == "" {
			return out, nil
		}
		if seen[*p.NextCursor] {
			return nil, fmt.Errorf("%s: %w", method, errCursorLoop)
		}
		seen[*p.NextCursor] = true
		params, _ = json.Marshal(struct {
			Cursor string `json:"cursor"`
		}{*p.NextCursor})
	}
}

// digest is sha256 over Info and the lists, each field length-prefixed so no two
// different catalogues share an encoding.
func (c *Catalog) digest() string {
	h := sha256.New()
	put := func(h hash.Hash, b []byte) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	put(h, []byte(c.Info.ProtocolVersion))
	put(h, c.Info.ServerInfo)
	put(h, c.Info.Capabilities)
	put(h, []byte(c.Info.Instructions))
	for _, l := range lists {
		items := *c.list(l.k)
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(items)))
		h.Write(n[:])
		for _, it := range items {
			put(h, it)
		}
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// usage is what the lists outside k occupy of the bounds.
func (c *Catalog) usage(k kind) (items, size int) {
	for _, l := range lists {
		if k&l.k != 0 {
			continue
		}
		for _, it := range *c.list(l.k) {
			items++
			size += len(it)
		}
	}
	return items, size
}

// build fetches the lists in k over s and returns the catalogue that results, starting
// from old (whose other lists are kept). changed is false when the content is the same.
func (p CatalogPolicy) build(ctx context.Context, s Session, old *Catalog, k kind) (next Catalog, changed bool, err error) {
	if old != nil {
		next = *old
	}
	next.Info = s.Info()
	adv := advertised(next.Info.Capabilities)
	usedItems, usedBytes := next.usage(k)
	b := budget{items: p.MaxItems - usedItems, bytes: p.MaxBytes - usedBytes, pages: p.MaxPages}
	var errs []error
	for _, l := range lists {
		if k&l.k == 0 {
			continue
		}
		if adv&l.k == 0 {
			*next.list(l.k) = nil
			continue
		}
		items, err := fetchList(ctx, s, l.method, l.k, &b)
		if err != nil {
			errs = append(errs, err)
			continue // keep what we had for this list
		}
		*next.list(l.k) = items
	}
	next.Truncated = b.truncated
	next.Dropped = b.dropped
	next.Digest = next.digest()
	if old != nil && old.Digest == next.Digest && old.Truncated == next.Truncated {
		return *old, false, errors.Join(errs...)
	}
	return next, true, errors.Join(errs...)
}
