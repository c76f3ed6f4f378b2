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

// createDirect creates name for writes that bypass the page cache (aligned
// buffers and lengths; durable only after Sync).
func createDirect(name string) (*os.File, error) {
	return os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|unix.O_DIRECT, 0o644)
}
