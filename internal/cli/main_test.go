package cli

import (
	"os"
	"testing"
)

// fakeHarnessEnv makes the test binary act as a harness that toolgate run starts (see
// fakeHarness in run_shutdown_test.go); its value is the data directory.
const fakeHarnessEnv = "TOOLGATE_CLI_FAKE_HARNESS"

func TestMain(m *testing.M) {
	if data := os.Getenv(fakeHarnessEnv); data != "" {
		os.Exit(fakeHarness(data, os.Args[1:]))
	}
	os.Exit(m.Run())
}
