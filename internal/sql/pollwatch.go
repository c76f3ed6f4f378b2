package sql

import (
	"context"
	"strconv"
	"time"

	"github.com/strata-db/strata/internal/kv"
	"github.com/strata-db/strata/internal/sql/catalog"
	"github.com/strata-db/strata/internal/sql/privilege"
)

// What an idle engine costs the cluster. The schema loop looks for changes
// other engines made: one transaction that reads the counters below in a
// batch. It looks every SchemaPoll (50 ms) while things change, and backs
// off (pace.Pace) to SchemaIdlePoll (500 ms) while nothing does: two
// transactions a second per engine instead of forty (the owner's job scan
// included), each with a TSO timestamp and a read of the first data
// region. The same batch reads the DDL owner record, so an engine that
// does not own DDL campaigns (in a transaction of its own) only when the
// owner's lease ran out. What snaps it back to SchemaPoll, held for schemaHotHold:
//
//   - a counter moved: the schema version (a DDL step elsewhere), the id
//     counter (a DDL job queued elsewhere, or a table created), the
//     privilege or statistics version;
//   - this engine queued a job, committed a step, or its owner loop found a
//     job to run or waiting for other engines (Engine.ownerLoop);
//   - a session of this engine waits for a job (waitJob).
//
// None of this changes what the schema lease promises (schemalease.go): an
// engine still renews its lease every lease/4 and loads any newer version
// first, so no engine runs more than one version behind, and the DDL owner
// still waits for every live engine's floor. What the pace decides is how
// soon an idle engine notices a job another engine queued or a step the
// owner committed: at most SchemaIdlePoll later, after which every engine
// looks every SchemaPoll for the rest of the job (the schema version moves
// at each step).

const (
	defaultSchemaIdlePoll = 500 * time.Millisecond
	// schemaHotHold is how long the loop stays at SchemaPoll after a
	// change: long enough for the steps of a job, which come a backfill
	// apart.
	schemaHotHold = 30 * time.Second
)

// watched is what the schema loop read last.
type watched struct {
	schema, nextID, privileges, stats int64
}

// readWatched reads, in one batch, the counters and the DDL owner record
// (nil: none).
func readWatched(ctx context.Context, txn kv.Txn) (watched, *catalog.Owner, error) {
	keys := [][]byte{catalog.VersionKey(), catalog.NextIDKey(), privilege.VersionKey(), catalog.StatsVersionKey(),
		catalog.OwnerKey()}
	vals, err := txn.BatchGet(ctx, keys)
	if err != nil {
		return watched{}, nil, err
	}
	var c [4]int64
	for i := range c {
		if v, ok := vals[string(keys[i])]; ok {
			if c[i], err = strconv.ParseInt(string(v), 10, 64); err != nil {
				return watched{}, nil, err
			}
		}
	}
	var o *catalog.Owner
	if v, ok := vals[string(keys[4])]; ok {
		if o, err = catalog.DecodeOwner(v); err != nil {
			return watched{}, nil, err
		}
	}
	return watched{schema: c[0], nextID: c[1], privileges: c[2], stats: c[3]}, o, nil
}

// observe records what a tick read and reports whether it differs from
// the previous tick's.
func (e *Engine) observe(w watched) bool {
	e.sl.mu.Lock()
	defer e.sl.mu.Unlock()
	changed := w != e.seen
	e.seen = w
	return changed
}
