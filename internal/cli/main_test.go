package cli_test

import (
	"os"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.StopPostgres() // started by the --database-url tests, if they ran
	os.Exit(code)
}
