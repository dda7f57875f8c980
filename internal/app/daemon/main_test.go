package daemon_test

import (
	"os"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.StopPostgres() // started by the replica tests, if they ran
	os.Exit(code)
}
