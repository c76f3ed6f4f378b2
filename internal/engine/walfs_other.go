//go:build !linux

package engine

import (
	"errors"
	"os"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// directFlags is zero where O_DIRECT|O_DSYNC is not used: WALs are
// ordinary files synced by Pebble.
const directFlags = 0

func openDirect(string) (vfs.File, error) { return nil, errors.ErrUnsupported }

func createDirect(string) (*os.File, error) { return nil, errors.ErrUnsupported }
