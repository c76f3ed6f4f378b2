package engine

import (
	"os"

	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"
)

// directFlags open a WAL for writes that bypass the page cache and are
// durable when they return.
const directFlags = unix.O_DIRECT | unix.O_DSYNC

func openDirect(name string) (vfs.File, error) {
	f, err := os.OpenFile(name, os.O_WRONLY|directFlags, 0)
	if err != nil {
		return nil, err
	}
	return &directFile{f: f, buf: alignedBuffer(64 << 10)}, nil
}
