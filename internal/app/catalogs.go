package app

import (
	"context"
	"encoding/json"

	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/store"
)

// catalogStore is host.CatalogStore over the store's mcp_catalogs table: a restarted
// toolgate answers lists from the persisted catalogue at once, whatever the upstream's
// state. Items are kept byte for byte.
type catalogStore struct{ st *store.Store }

var _ host.CatalogStore = catalogStore{}

func (c catalogStore) LoadCatalog(ctx context.Context, server string) (host.Catalog, bool, error) {
	sc, ok, err := c.st.LoadMCPCatalog(ctx, server)
	if err != nil || !ok {
		return host.Catalog{}, false, err
	}
	var info host.SessionInfo
	if err := json.Unmarshal(sc.Info, &info); err != nil {
		return host.Catalog{}, false, err
	}
	return host.Catalog{Version: sc.Version, Digest: sc.Digest, FetchedAt: sc.FetchedAt, Info: info,
		Tools: sc.Tools, Resources: sc.Resources, ResourceTemplates: sc.ResourceTemplates, Prompts: sc.Prompts,
		Truncated: sc.Truncated, Dropped: sc.Dropped}, true, nil
}

func (c catalogStore) SaveCatalog(ctx context.Context, server string, cat host.Catalog) error {
	info, err := json.Marshal(cat.Info)
	if err != nil {
		return err
	}
	return c.st.SaveMCPCatalog(ctx, server, store.MCPCatalog{Version: cat.Version, Digest: cat.Digest, Info: info,
		Tools: cat.Tools, Resources: cat.Resources, ResourceTemplates: cat.ResourceTemplates, Prompts: cat.Prompts,
		Truncated: cat.Truncated, Dropped: cat.Dropped, FetchedAt: cat.FetchedAt})
}

func (c catalogStore) DeleteCatalog(ctx context.Context, server string) error {
	return c.st.DeleteMCPCatalog(ctx, server)
}
