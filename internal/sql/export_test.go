package sql

import (
	"testing"

	"github.com/strata-db/strata/internal/kv"
)

// testStorage, when set, replaces the in-memory kv double under every test
// engine (realkv_test.go installs a real in-process node).
var testStorage func(t *testing.T) kv.Storage

// SetTestStorage installs the storage factory used by the package's tests.
func SetTestStorage(f func(t *testing.T) kv.Storage) { testStorage = f }
