package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"sync"

	"github.com/toolgate/toolgate/internal/keystore"
	"github.com/toolgate/toolgate/internal/netguard"
	"github.com/toolgate/toolgate/internal/upstream"
	"github.com/toolgate/toolgate/internal/upstreamauth"
	"github.com/toolgate/toolgate/internal/version"
)

// cimdURL is the client ID metadata document URL the suite's authorization
// servers expect (they do not fetch it).
const cimdURL = "https://conformance-test.local/client-metadata.json"

// direct is the harness over toolgate's upstream stack in this process.
type direct struct {
	conn    *upstream.Conn
	auth    *upstreamauth.Server
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
	ks, err := keystore.Open(dataDir, &memBackend{})
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
		ClientInfo:   upstream.Implementation{Name: "toolgate-conformance", Version: version.String()},
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
	return os.RemoveAll(d.dataDir)
}

// answerServerRequest is the harness side of the older revisions'
// server-to-client requests (the stateless one uses input_required instead,
// answered in mrtr.go).
func answerServerRequest(_ context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	if strings.HasPrefix(method, "ping") {
		return json.RawMessage(`{}`), nil
	}
	if res := inputResponse(method, params); res != nil {
		return res, nil
	}
	return upstream.DefaultRequestHandler(context.Background(), method, params)
}

// memBackend keeps the sealed secrets of this one run in memory (a fresh
// toolgate's data directory would keep them in its database).
type memBackend struct {
	mu    sync.Mutex
	blobs map[[3]string][]byte
}

func (m *memBackend) PutSecret(_ context.Context, scope, server, name string, sealed []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.blobs == nil {
		m.blobs = map[[3]string][]byte{}
	}
	m.blobs[[3]string{scope, server, name}] = append([]byte(nil), sealed...)
	return nil
}

func (m *memBackend) GetSecret(_ context.Context, scope, server, name string) ([]byte, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.blobs[[3]string{scope, server, name}]
	return append([]byte(nil), b...), ok, nil
}

func (m *memBackend) DeleteSecret(_ context.Context, scope, server, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.blobs, [3]string{scope, server, name})
	return nil
}

func (m *memBackend) ListSecrets(_ context.Context, scope, server string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	names := []string{}
	for k := range m.blobs {
		if k[0] == scope && k[1] == server {
			names = append(names, k[2])
		}
	}
	return names, nil
}
