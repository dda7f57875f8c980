package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// ConformanceCheck is one check of the official MCP conformance suite's results.
type ConformanceCheck struct {
	ID           string `json:"id"`
	Status       string `json:"status"`
	ErrorMessage string `json:"errorMessage"`
}

// ConformanceResults reads the checks of every scenario from the suite's output
// folder, where each scenario leaves server-NAME-TIMESTAMP/checks.json.
func ConformanceResults(t testing.TB, dir string) map[string][]ConformanceCheck {
	t.Helper()
	stamp := regexp.MustCompile(`^server-(.+)-\d{4}-\d\d-\d\dT[\d-]+Z$`)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]ConformanceCheck{}
	for _, e := range entries {
		m := stamp.FindStringSubmatch(e.Name())
		if m == nil {
			t.Errorf("unexpected result %s", e.Name())
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "checks.json"))
		if err != nil {
			t.Errorf("scenario %s: %v", m[1], err)
			continue
		}
		var checks []ConformanceCheck
		if err := json.Unmarshal(b, &checks); err != nil {
			t.Errorf("scenario %s: %v", m[1], err)
			continue
		}
		out[m[1]] = checks
	}
	return out
}

// ConformanceRun is one run of an official conformance suite's server scenarios.
type ConformanceRun struct {
	Name, Pkg string
	Args      []string
	// Stateless serves the direct fixture statelessly (the 2026-07-28 era: the
	// go-sdk's stateful handler does not serve it) rather than with sessions (which
	// sampling and elicitation need).
	Stateless bool
}

// ConformanceRuns are the suites a gateway must pass as the fixture does directly.
var ConformanceRuns = []ConformanceRun{
	{"0.1.16 --suite all", "@modelcontextprotocol/conformance", []string{"--suite", "all"}, false},
	{"0.2.0-alpha.12 --requirements 2025-11-25", "@modelcontextprotocol/conformance-next", []string{"--requirements", "2025-11-25"}, false},
	{"0.2.0-alpha.12 --requirements 2026-07-28", "@modelcontextprotocol/conformance-next", []string{"--requirements", "2026-07-28"}, true},
}

// RunConformanceSuite runs one suite (main: its dist/index.js) against url with node
// and env, logs its summary under label, and returns each scenario's failing checks
// ("" when none failed).
func RunConformanceSuite(t testing.TB, node string, env []string, main, url string, args []string, label string) map[string]string {
	t.Helper()
	results := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{main, "server", "--url", url, "-o", results}, args...)...)
	cmd.Env = env
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	_, summary, found := strings.Cut(string(out), "=== SUMMARY ===")
	if !found || !strings.Contains(summary, "Total:") {
		t.Fatalf("%s: the suite did not run to its end (%v):\n%s", label, err, out)
	}
	t.Logf("%s %s:%s", label, strings.Join(args, " "), summary)
	res := map[string]string{}
	for n, checks := range ConformanceResults(t, results) {
		var failed []string
		for _, c := range checks {
			switch c.Status {
			case "FAILURE":
				failed = append(failed, fmt.Sprintf("check %s: %s", c.ID, c.ErrorMessage))
			case "SUCCESS":
			default: // a warning or a check that could not be exercised: reported
				t.Logf("%s: %s: check %s %s: %s", label, n, c.ID, c.Status, c.ErrorMessage)
			}
		}
		res[n] = strings.Join(failed, "; ")
	}
	return res
}

// CompareConformance fails t for every scenario whose checks all pass directly (want)
// and that did not run, or failed, through the gateway (got), but for the named gaps,
// each of which must fail with a message containing the one given.
func CompareConformance(t testing.TB, want, got, gaps map[string]string) {
	t.Helper()
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if want[n] != "" {
			continue // fails directly: reported, not required
		}
		if why, ran := got[n]; !ran {
			t.Errorf("%s: passes directly, did not run through toolgate", n)
		} else if why != "" {
			if gap, ok := gaps[n]; ok && strings.Contains(why, gap) {
				t.Logf("%s: open gap (passes directly, not through toolgate): %s", n, why)
				continue
			}
			t.Errorf("%s: passes directly, fails through toolgate: %s", n, why)
		}
	}
}
