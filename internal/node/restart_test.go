package node

import (
	"context"
	"io"
	"log/slog"
	"math"
	"testing"

	"github.com/strata-db/strata/internal/kv"
	"github.com/strata-db/strata/kvpb"
)

// A transaction that took its start timestamp before a restart and
// prewrites after it must still meet the commits made above that
// timestamp before the restart. Its newer-write check may skip the engine
// only when the key's recent-write bound and the engine's timestamp floor
// are both below the start ts; here the commit reaches the reopened node
// either in a flushed SST (the floor, persisted as the apply path's
// ceiling, must be above it) or through the Raft log's replay (the bound
// must cover it).
func TestPrewriteConflictsAcrossRestart(t *testing.T) {
	for _, tc := range []struct {
		name    string
		flushed bool
	}{{"flushed", true}, {"replayed", false}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
			n, err := Start(ctx, Config{DataDir: dir, GCInterval: -1, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			startTS, err := n.pd.NextTimestamp(ctx)
			if err != nil {
				t.Fatal(err)
			}
			putKey(t, n.Storage(), "k", "v1") // commits above startTS
			if tc.flushed {
				if err := n.eng.KV.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			n.Close()

			n, err = Start(ctx, Config{DataDir: dir, GCInterval: -1, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			defer n.Close()
			floor := n.locks.RecentWrites().Floor()
			if tc.flushed && (floor == math.MaxUint64 || floor <= startTS) {
				t.Fatalf("floor after reopening a flushed engine = %d, want known and above %d", floor, startTS)
			}
			for _, onePC := range []bool{false, true} {
				resp, err := n.kv.KvPrewrite(ctx, &kvpb.PrewriteRequest{
					Context:      &kvpb.Context{RegionId: dataRegionID},
					Mutations:    []*kvpb.Mutation{{Op: kvpb.Op_Put, Key: []byte("k"), Value: []byte("late")}},
					PrimaryLock:  []byte("k"),
					StartVersion: startTS,
					LockTtl:      3000,
					TryOnePc:     onePC,
				})
				if err != nil || resp.RegionError != nil || len(resp.Errors) != 1 || resp.Errors[0].GetConflict() == nil {
					t.Fatalf("prewrite (one-phase %v) at %d under a commit made before the restart: %v %+v", onePC, startTS, err, resp)
				}
			}
			txn, err := n.Storage().Begin(ctx, kv.TxnOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if v, err := txn.Get(ctx, []byte("k")); err != nil || string(v) != "v1" {
				t.Fatalf("k after the refused prewrites = %q, %v; want v1", v, err)
			}
		})
	}
}
