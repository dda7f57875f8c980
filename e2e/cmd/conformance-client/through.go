package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/upstream"
	"github.com/toolgate/toolgate/internal/version"
)

// serverName is the name the scenario's server is installed under.
const serverName = "conformance"

// through is the harness over a real toolgate: a fresh data directory, the
// scenario's server installed in it as a remote upstream, signed in to
// headlessly when the scenario's server asks for a sign-in, and every call
// made through `toolgate bridge --server conformance --stdio` as a harness
// makes it, in the 2026-07-28 revision (toolgate speaks the older ones to a
// server that does not speak it). What reaches the suite's server is what
// toolgate's host sends.
type through struct {
	bin     string
	dataDir string
	log     io.Writer
	proc    *upstream.Process
	conn    *upstream.Conn
	// installed: the data directory has a store (its audit trail is logged at Close).
	installed bool
}

// toolgateBinary is the toolgate the harness runs: TOOLGATE_CONFORMANCE_TOOLGATE,
// else a toolgate beside this driver, else the one on PATH.
func toolgateBinary() (string, error) {
	if p := os.Getenv("TOOLGATE_CONFORMANCE_TOOLGATE"); p != "" {
		return p, nil
	}
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), "toolgate")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return exec.LookPath("toolgate")
}

// openThrough installs the scenario's server in a fresh toolgate, signs in
// when the scenario needs a person's sign-in, and opens the bridge.
func openThrough(ctx context.Context, serverURL string, st setup, logw io.Writer, log *slog.Logger) (*through, error) {
	bin, err := toolgateBinary()
	if err != nil {
		return nil, fmt.Errorf("finding toolgate: %w", err)
	}
	def, login, err := definition(serverURL, st)
	if err != nil {
		return nil, err
	}
	dataDir, err := os.MkdirTemp("", "toolgate-conformance-")
	if err != nil {
		return nil, err
	}
	h := &through{bin: bin, dataDir: dataDir, log: logw}
	doc, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{serverName: def}})
	steps := [][]string{
		{"install", "-"},
		{"grant", "add", "--principal", "default", "--tool", serverName + ".*"},
	}
	// What the server may ask the harness (docs/trust.md, "Requests from servers").
	for _, kind := range []string{"elicitation", "sampling", "roots"} {
		steps = append(steps, []string{"grant", "add", "--principal", "default", "--tool", "mcp.request." + kind,
			"--action", "execute", "--resource", "mcp:" + serverName})
	}
	if login {
		// The suite's authorization servers redirect at once.
		steps = append(steps, []string{"auth", "login", "--headless", serverName})
	}
	for _, args := range steps {
		var in io.Reader
		if args[0] == "install" {
			in = bytes.NewReader(doc)
		}
		if _, err := h.run(ctx, in, args...); err != nil {
			h.Close()
			return nil, err
		}
		h.installed = true
	}
	// A person signs in again when toolgate asks for it (the server moved to another
	// authorization server, say): at most twice.
	for attempt := 0; ; attempt++ {
		err = h.openBridge(ctx, log)
		if err == nil {
			break
		}
		if !login || attempt == 2 || !h.signInRequired(ctx) {
			h.Close()
			return nil, err
		}
		if _, err := h.run(ctx, nil, "auth", "login", "--headless", serverName); err != nil {
			h.Close()
			return nil, err
		}
	}
	return h, nil
}

// openBridge starts `toolgate bridge --server conformance --stdio` and opens the
// harness's connection to it.
func (h *through) openBridge(ctx context.Context, log *slog.Logger) error {
	p, err := upstream.Start(upstream.Spec{Name: "toolgate-bridge", Command: h.bin,
		Args: []string{"bridge", "--data-dir", h.dataDir, "--stdio", "--server", serverName}, Logger: log})
	if err != nil {
		return err
	}
	c, err := upstream.DialStdio(ctx, p, upstream.Options{
		Era:          upstream.EraStateless,
		ClientInfo:   mcpspec.Implementation{Name: "toolgate-conformance", Version: version.String()},
		Capabilities: json.RawMessage(`{"elicitation":{}}`),
		OnRequest:    answerServerRequest,
		Logger:       log,
		Name:         "toolgate-bridge",
	})
	if err != nil {
		tail := p.StderrTail()
		fmt.Fprintf(h.log, "toolgate bridge: %v\n%s\n", err, tail)
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = p.Stop(sctx)
		return fmt.Errorf("opening the bridge: %w: %s", err, lastLine(tail))
	}
	h.proc, h.conn = p, c
	return nil
}

// signInRequired asks toolgate whether the server needs a person's sign-in.
func (h *through) signInRequired(ctx context.Context) bool {
	out, err := h.run(ctx, nil, "auth", "status", serverName, "--json")
	if err != nil {
		return false
	}
	var st struct {
		Auth struct {
			State string `json:"state"`
		} `json:"auth"`
	}
	// signed_in is the only state in which signing in again changes nothing; a
	// grant the hosting process dropped (it parked) leaves the store signed_out.
	return json.Unmarshal(out, &st) == nil && st.Auth.State != "" && st.Auth.State != "signed_in"
}

// definition is the scenario's server as an mcpServers entry (docs/mcp-config.md,
// "OAuth"), and whether a person's sign-in precedes the calls: the auth scenarios'
// servers all refuse a request without a token, and a machine client signs in by
// itself.
func definition(serverURL string, st setup) (map[string]any, bool, error) {
	def := map[string]any{"type": "http", "url": serverURL}
	switch st.scenario {
	case "auth/client-credentials-basic":
		def["oauth"] = map[string]any{"grant": "client_credentials", "clientId": st.str("client_id"), "clientSecret": st.str("client_secret")}
		return def, false, nil
	case "auth/client-credentials-jwt":
		def["oauth"] = map[string]any{"grant": "client_credentials", "clientId": st.str("client_id"), "privateKey": st.str("private_key_pem")}
		return def, false, nil
	case "auth/enterprise-managed-authorization", "auth/dpop", "auth/dpop-nonce", "auth/wif-jwt-bearer":
		return nil, false, errUnsupported
	}
	if !strings.HasPrefix(st.scenario, "auth/") {
		return def, false, nil
	}
	oauth := map[string]any{"clientMetadataUrl": cimdURL}
	if id := st.str("client_id"); id != "" {
		oauth["clientId"] = id
		if secret := st.str("client_secret"); secret != "" {
			oauth["clientSecret"] = secret
		}
	}
	def["oauth"] = oauth
	return def, true, nil
}

// run runs one toolgate command on the data directory; its stderr goes to the
// log (toolgate writes no secret there).
func (h *through) run(ctx context.Context, stdin io.Reader, args ...string) ([]byte, error) {
	full := append([]string{args[0], "--data-dir", h.dataDir}, args[1:]...)
	cmd := exec.CommandContext(ctx, h.bin, full...)
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	fmt.Fprintf(h.log, "toolgate %s: exit %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	if err != nil {
		return nil, fmt.Errorf("toolgate %s: %w: %s", strings.Join(args, " "), err, lastLine(stderr.String()))
	}
	return stdout.Bytes(), nil
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

func (h *through) Call(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	return h.conn.Call(ctx, method, params)
}

// Close ends the bridge, appends the data directory's audit trail to the log (the
// e2e test checks it holds the sign-ins and no secret), and removes the directory.
func (h *through) Close() error {
	var errs []error
	if h.conn != nil {
		errs = append(errs, h.conn.Close())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if h.proc != nil {
		errs = append(errs, h.proc.Stop(ctx))
	}
	if h.installed {
		if out, err := h.run(ctx, nil, "audit", "--json"); err == nil {
			fmt.Fprintf(h.log, "audit trail:\n%s", out)
		}
	}
	errs = append(errs, os.RemoveAll(h.dataDir))
	return errors.Join(errs...)
}
