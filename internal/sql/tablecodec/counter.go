package tablecodec

import (
	"context"
	"errors"
	"strconv"

	"github.com/strata-db/strata/internal/kv"
)

// ReadCounter reads a version counter the SQL layer keeps as a decimal
// string under key (the schema, statistics and privilege versions): its
// value visible to txn, 0 when it was never set.
func ReadCounter(ctx context.Context, txn kv.Txn, key []byte) (int64, error) {
	v, err := txn.Get(ctx, key)
	if errors.Is(err, kv.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(string(v), 10, 64)
}
