package cli

import (
	"os"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
)

// fakeHarnessEnv makes the test binary act as a harness that toolgate run starts (see
// fakeHarness in run_shutdown_test.go); its value is the data directory.
const fakeHarnessEnv = "TOOLGATE_CLI_FAKE_HARNESS"

func TestMain(m *testing.M) {
	if data := os.Getenv(fakeHarnessEnv); data != "" {
		os.Exit(fakeHarness(data, os.Args[1:]))
	}
	code := m.Run()
	testenv.StopPostgres() // started by the --database-url tests, if they ran
	os.Exit(code)
}
