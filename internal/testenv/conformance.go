package testenv

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"
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
