package bench

import (
	"context"
	"os"
	"testing"

	"github.com/clawpen/clawpen/internal/store"
	"github.com/clawpen/clawpen/internal/store/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// The store section's rows at a tiny size, on both databases: every run's
// work finds its message and records its answer.
func TestStoreRows(t *testing.T) {
	for _, db := range []struct {
		name string
		open func(ctx context.Context) (*store.Store, error)
	}{
		{"sqlite", nil},
		{"postgres", func(ctx context.Context) (*store.Store, error) { return store.OpenPostgres(ctx, pgtest.NewDatabase(t)) }},
	} {
		t.Run(db.name, func(t *testing.T) {
			rows, err := storeRows(t.Context(), Options{Runs: 10}, []string{"rate", "handle", "run"}, 3, 30, 40, db.open)
			if err != nil {
				t.Fatal(err)
			}
			if rows[0].Value <= 0 || rows[1].Runs != 40 || rows[2].Runs != 10 || rows[2].P50 <= 0 {
				t.Fatalf("rows %+v", rows)
			}
		})
	}
}
