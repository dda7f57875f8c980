package app

import (
	"github.com/toolgate/toolgate/internal/mcpconfig"
	"github.com/toolgate/toolgate/internal/upstream"
)

// remoteEra is the era the host dials a remote server in (docs/host.md, "Eras"):
// a Streamable HTTP server is asked server/discover first (2026-07-28) and, when
// its answer is not a stateless one, dialled again on a new connection with
// initialize (upstream.EraProbe), as the revision's compatibility rules say and
// as a client of the revision must. The legacy HTTP+SSE transport has no
// stateless form, and a stdio server is started as declared: both stay legacy.
func remoteEra(kind mcpconfig.Kind) upstream.Era {
	if kind == mcpconfig.HTTP {
		return upstream.EraProbe
	}
	return upstream.EraLegacy
}
