package mgmt

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/toolgate/toolgate/internal/textscan"
)

// The renderers print results for a person (toolgate ls, install, policy set, restart,
// uninstall, details). Every string that came from a config or an upstream (names,
// titles, descriptions, stderr) goes through textscan.Escape, so a hostile server
// cannot rewrite the terminal or hide text; long cells are cut with "…". Times are
// UTC. --json prints the result itself instead (Encode).

// cell is s safe for one table cell, at most max runes; "-" when empty.
func cell(s string, max int) string {
	if s == "" {
		return "-"
	}
	return textscan.Escape(s, max)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func unixTime(s int64) string {
	if s == 0 {
		return "-"
	}
	return time.Unix(s, 0).UTC().Format(time.RFC3339)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// transportCell is a transport in one short cell: "stdio: npx -y pkg" or "http: URL".
func transportCell(t Transport, max int) string {
	var b strings.Builder
	b.WriteString(string(t.Kind))
	b.WriteString(":")
	if t.URL != "" {
		b.WriteString(" " + t.URL)
	}
	if t.Command != "" {
		b.WriteString(" " + t.Command)
	}
	for _, a := range t.Args {
		b.WriteString(" " + a)
	}
	return cell(b.String(), max)
}

// WriteList prints mcp/list's servers as a table.
func WriteList(w io.Writer, r *ListResult) error {
	if len(r.Servers) == 0 {
		_, err := fmt.Fprintln(w, "no MCP servers installed (toolgate install FILE adds them)")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSCOPE\tSTATUS\tENABLED\tIMPLICIT\tTOOLS\tTRANSPORT\tID")
	for _, s := range r.Servers {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", cell(s.Name, 40), cell(s.Scope, 12), cell(s.Status, 16),
			yesNo(s.Policy.Enabled), yesNo(s.Policy.AllowImplicitInvocation), s.ToolsCount,
			transportCell(s.Transport, 48), cell(s.ID, 24))
	}
	return tw.Flush()
}

// WriteInstall prints an install result: the document's own diagnostics, then each
// server's outcome with its diagnostics under it, then the whole config's status.
func WriteInstall(w io.Writer, r *InstallResult) error {
	for _, d := range r.Diagnostics {
		fmt.Fprintf(w, "config: %s\n", cell(d.String(), 0))
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, s := range r.Servers {
		id := ""
		if s.Server != nil {
			id = " (" + cell(s.Server.ID, 24) + ")"
		}
		fmt.Fprintf(tw, "%s\t%s%s\n", cell(s.Status, 20), cell(s.Name, 60), id)
		for _, d := range s.Diagnostics {
			fmt.Fprintf(tw, "\t  %s\n", cell(d.String(), 0))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	ok := 0
	for _, s := range r.Servers {
		if s.Server != nil {
			ok++
		}
	}
	_, err := fmt.Fprintf(w, "status: %s (%d of %s valid); %s written\n", cell(r.Status, 20), ok,
		plural(len(r.Servers), "server", "servers"), plural(r.Audit.EventsWritten, "audit event", "audit events"))
	return err
}

func policyLine(s *Server) string {
	enabled, implicit := "disabled", "off"
	if s.Policy.Enabled {
		enabled = "enabled"
	}
	if s.Policy.AllowImplicitInvocation {
		implicit = "on"
	}
	return enabled + ", implicit invocation " + implicit
}

// WritePolicy prints the policy a server has after mcp/policy/set.
func WritePolicy(w io.Writer, r *PolicySetResult) error {
	what := "policy changed"
	if r.Audit.EventsWritten == 0 {
		what = "policy unchanged"
	}
	_, err := fmt.Fprintf(w, "%s: %s: %s (%s written)\n", cell(r.Server.Name, 60), what, policyLine(&r.Server),
		plural(r.Audit.EventsWritten, "audit event", "audit events"))
	return err
}

// WriteRestart prints an accepted restart.
func WriteRestart(w io.Writer, r *RestartResult) error {
	_, err := fmt.Fprintf(w, "%s: restart accepted (now %s); toolgate ls shows the state it reaches\n",
		cell(r.Server.Name, 60), cell(r.Server.Runtime.State, 16))
	return err
}

// WriteUninstall prints a removal.
func WriteUninstall(w io.Writer, r *UninstallResult) error {
	_, err := fmt.Fprintf(w, "%s (%s): uninstalled; its past calls and audit events are kept\n",
		cell(r.Server.Name, 60), cell(r.Server.ID, 24))
	return err
}

// WriteDetails prints mcp/server/details as sections: the server, its health, its
// sign-in (a remote server's OAuth), each catalogue list, the recent audit and the
// recent bindings.
func WriteDetails(w io.Writer, r *DetailsResult) error {
	s := &r.Server
	title := cell(s.Name, 60) + " (" + cell(s.ID, 24) + ")"
	if s.DisplayName != "" {
		title += "  " + cell(s.DisplayName, 60)
	}
	fmt.Fprintln(w, title)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	live := "not live"
	if s.Runtime.Live {
		live = "live"
	}
	fmt.Fprintf(tw, "  scope\t%s\n", cell(s.Scope, 12))
	fmt.Fprintf(tw, "  status\t%s (runtime %s, %s, last seen %s)\n", cell(s.Status, 16), cell(s.Runtime.State, 16), live, unixTime(s.Runtime.LastSeenAt))
	fmt.Fprintf(tw, "  policy\t%s\n", policyLine(s))
	fmt.Fprintf(tw, "  required\t%s\n", yesNo(s.Required))
	fmt.Fprintf(tw, "  transport\t%s\n", transportCell(s.Transport, 0))
	for _, k := range sortedKeys(s.Transport.Env) {
		fmt.Fprintf(tw, "  env %s\t%s\n", cell(k, 60), cell(s.Transport.Env[k].SecretRef, 40))
	}
	for _, k := range sortedKeys(s.Transport.Headers) {
		fmt.Fprintf(tw, "  header %s\t%s\n", cell(k, 60), cell(s.Transport.Headers[k].SecretRef, 40))
	}
	fmt.Fprintf(tw, "  fingerprint\t%s\n", cell(s.Fingerprint, 80))
	if err := tw.Flush(); err != nil {
		return err
	}

	h := &r.Health
	fmt.Fprintln(w, "\nHealth")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  state\t%s (%s, since %s)\n", cell(h.State, 16), cell(h.StatusReason, 32), unixTime(h.Since))
	fmt.Fprintf(tw, "  last error\t%s\n", cell(h.LastError, 200))
	circuit := "closed"
	if h.Retry.CircuitOpen {
		circuit = "open"
	}
	fmt.Fprintf(tw, "  retry\t%s, %s in the window; circuit %s; next attempt %s\n",
		plural(h.Retry.Attempts, "attempt", "attempts"), plural(h.Retry.Failures, "failure", "failures"), circuit, unixTime(h.Retry.NextAttemptAt))
	fmt.Fprintf(tw, "  catalogue\tversion %d, fetched %s\n", h.CatalogVersion, unixTime(h.CatalogFetchedAt))
	if h.CatalogError != "" {
		fmt.Fprintf(tw, "  catalogue error\t%s\n", cell(h.CatalogError, 200))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if tail := strings.TrimRight(h.StderrTail, "\n"); tail != "" {
		fmt.Fprintln(w, "  stderr tail")
		for _, line := range strings.Split(tail, "\n") {
			fmt.Fprintf(w, "    %s\n", textscan.Escape(line, 200))
		}
	}

	if err := writeAuthSection(w, r.Auth); err != nil {
		return err
	}

	c := &r.Catalog
	section(w, "Tools", len(c.Tools), "CALLABLE\tNAME\tTITLE\tINPUT\tANNOTATIONS\tDESCRIPTION", func(tw io.Writer) {
		for _, t := range c.Tools {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", cell(t.Callable, 60), cell(t.Name, 60), cell(t.Title, 40),
				cell(schemaCell(t.InputSchema), 60), cell(string(t.Annotations), 60), cell(t.Description, 60))
		}
	})
	for _, t := range c.Tools {
		for _, d := range t.Diagnostics {
			fmt.Fprintf(w, "  %s: %s\n", cell(t.Callable, 60), cell(d.String(), 0))
		}
	}
	section(w, "Resources", len(c.Resources), "URI\tNAME\tMIME TYPE", func(tw io.Writer) {
		for _, x := range c.Resources {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", cell(x.URI, 80), cell(x.Name, 40), cell(x.MIMEType, 30))
		}
	})
	section(w, "Resource templates", len(c.ResourceTemplates), "URI TEMPLATE\tNAME\tMIME TYPE", func(tw io.Writer) {
		for _, x := range c.ResourceTemplates {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", cell(x.URITemplate, 80), cell(x.Name, 40), cell(x.MIMEType, 30))
		}
	})
	section(w, "Prompts", len(c.Prompts), "NAME\tTITLE\tARGUMENTS", func(tw io.Writer) {
		for _, x := range c.Prompts {
			var args []string
			for _, a := range x.Arguments {
				n := a.Name
				if a.Required {
					n += "*"
				}
				args = append(args, n)
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", cell(x.Name, 60), cell(x.Title, 40), cell(strings.Join(args, " "), 60))
		}
	})
	section(w, "Recent audit", len(r.Audit), "SEQ\tTIME\tPRINCIPAL\tTOOL\tDECISION\tCODE", func(tw io.Writer) {
		for _, a := range r.Audit {
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\n", a.Seq, unixTime(a.At), cell(a.Principal, 40), cell(a.Tool, 60), cell(a.Decision, 20), cell(a.Code, 40))
		}
	})
	section(w, "Recent bindings", len(r.RecentBindings), "CALLABLE\tRAW NAME\tFIRST SEEN\tLAST SEEN", func(tw io.Writer) {
		for _, b := range r.RecentBindings {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", cell(b.Callable, 60), cell(b.RawName, 60), unixTime(b.FirstSeenAt), unixTime(b.LastSeenAt))
		}
	})
	return nil
}

// section prints a titled table, or only the title with (0) when it is empty.
func section(w io.Writer, title string, n int, header string, rows func(io.Writer)) {
	fmt.Fprintf(w, "\n%s (%d)\n", title, n)
	if n == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  %s\n", header)
	rows(tw)
	_ = tw.Flush()
}

// schemaCell is an input schema summary: its properties, required ones marked "*".
func schemaCell(s SchemaSummary) string {
	req := map[string]bool{}
	for _, r := range s.Required {
		req[r] = true
	}
	var parts []string
	for _, p := range s.Properties {
		if req[p] {
			p += "*"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, " ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// writeAuthSection prints a remote server's sign-in (details' auth), if it has one.
// Its text may come from an authorization server: every value is escaped.
func writeAuthSection(w io.Writer, raw json.RawMessage) error {
	if len(raw) == 0 {
		return nil
	}
	var a struct {
		State, Reason, Detail, Issuer, Grant string
		ClientID                             string   `json:"client_id"`
		Scopes                               []string `json:"scopes"`
		ExpiresAt                            string   `json:"expires_at"`
		Refreshable                          bool     `json:"refreshable"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return fmt.Errorf("reading the server's sign-in: %w", err)
	}
	fmt.Fprintln(w, "\nSign-in")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	state := cell(a.State, 24)
	if a.Reason != "" {
		state += " (" + cell(a.Reason, 32) + ": " + cell(a.Detail, 200) + ")"
	}
	fmt.Fprintf(tw, "  state\t%s\n", state)
	for _, kv := range [][2]string{{"issuer", a.Issuer}, {"grant", a.Grant}, {"client", a.ClientID},
		{"scopes", strings.Join(a.Scopes, " ")}, {"expires", a.ExpiresAt}} {
		if kv[1] != "" {
			fmt.Fprintf(tw, "  %s\t%s\n", kv[0], cell(kv[1], 200))
		}
	}
	if a.Grant != "" {
		fmt.Fprintf(tw, "  refreshable\t%s\n", yesNo(a.Refreshable))
	}
	return tw.Flush()
}
