package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"

	"github.com/toolgate/toolgate/internal/keystore"
	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/netguard"
	"github.com/toolgate/toolgate/internal/store"
	"github.com/toolgate/toolgate/internal/upstream"
	"github.com/toolgate/toolgate/internal/upstreamauth"
	"github.com/toolgate/toolgate/internal/version"
)

// cimdURL is the client ID metadata document URL the suite's authorization
// servers expect (they do not fetch it).
const cimdURL = "https://conformance-test.local/client-metadata.json"

// direct is the harness over toolgate's upstream stack in this process
// (TOOLGATE_CONFORMANCE_MODE=direct).
type direct struct {
	conn    *upstream.Conn
	auth    *upstreamauth.Server
	db      *store.Store
	dataDir string
}

// openDirect configures the server the way an install would (the
// authorization the scenario's context calls for) and dials it.
func openDirect(ctx context.Context, serverURL string, st setup, log *slog.Logger) (*direct, error) {
	dataDir, err := os.MkdirTemp("", "toolgate-conformance-")
	if err != nil {
		return nil, err
	}
	d := &direct{dataDir: dataDir}
	// The data directory of a fresh toolgate: its database keeps the sealed
	// tokens and registration, its keystore.key the key.
	if d.db, err = store.Open(ctx, dataDir); err != nil {
		d.Close()
		return nil, err
	}
	ks, err := keystore.Open(dataDir, d.db)
	if err != nil {
		d.Close()
		return nil, err
	}
	guard := netguard.NewGuard(netguard.Policy{}, nil)
	cfg := upstreamauth.Config{
		Server:    "conformance",
		URL:       serverURL,
		Store:     upstreamauth.NewKeystoreStore(ks, "user"),
		Guard:     guard,
		Headless:  true,
		Client:    upstreamauth.ClientConfig{MetadataURL: cimdURL},
		Logger:    log,
		Transport: netguard.NewTransport(guard),
	}
	switch st.scenario {
	case "auth/client-credentials-basic":
		cfg.ClientCredentials = &upstreamauth.ClientCredentials{ID: st.str("client_id"), Secret: keystore.NewSecretString(st.str("client_secret"))}
	case "auth/client-credentials-jwt":
		cfg.ClientCredentials = &upstreamauth.ClientCredentials{ID: st.str("client_id"),
			PrivateKey: keystore.NewSecretString(st.str("private_key_pem")), SigningAlg: st.str("signing_algorithm")}
	case "auth/enterprise-managed-authorization", "auth/dpop", "auth/dpop-nonce", "auth/wif-jwt-bearer":
		d.Close()
		return nil, errUnsupported
	default:
		if id, secret := st.str("client_id"), st.str("client_secret"); id != "" {
			cfg.Client.ID, cfg.Client.Secret = id, keystore.NewSecretString(secret)
		}
	}
	if d.auth, err = upstreamauth.New(cfg); err != nil {
		d.Close()
		return nil, err
	}
	d.conn, err = upstream.DialHTTP(ctx, upstream.HTTPSpec{URL: serverURL, Auth: d.auth, Transport: netguard.NewTransport(guard)}, upstream.Options{
		Era:          upstream.EraProbe,
		ClientInfo:   mcpspec.Implementation{Name: "toolgate-conformance", Version: version.String()},
		Capabilities: json.RawMessage(`{"elicitation":{}}`),
		OnRequest:    answerServerRequest,
		Logger:       log,
		Name:         "conformance",
	})
	if err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

func (d *direct) Call(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	return d.conn.Call(ctx, method, params)
}

func (d *direct) Close() error {
	if d.conn != nil {
		d.conn.Close()
	}
	if d.auth != nil {
		d.auth.Close()
	}
	if d.db != nil {
		d.db.Close()
	}
	return os.RemoveAll(d.dataDir)
}

// answerServerRequest is the harness side of the older revisions'
// server-to-client requests (the stateless one uses input_required instead,
// answered in mrtr.go).
func answerServerRequest(_ context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	if res := inputResponse(method, params); res != nil {
		return res, nil
	}
	return upstream.DefaultRequestHandler(context.Background(), method, params)
}
