package app

import (
	"os"
	"testing"

	"github.com/clawpen/clawpen/internal/store/pgtest"
)

// The PostgreSQL server some tests start is stopped after them.
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
