//go:build unix

package mvcc

import "syscall"

// allocRing returns n bytes of zeroed memory outside the Go heap (an
// anonymous mapping), so that the version cache's rings neither count
// toward the heap size the garbage collector paces itself by (with them
// in the heap, GOGC=100 let as much garbage pile up again) nor occupy
// memory before a page is written. freeRing returns it.
func allocRing(n int) ([]byte, error) {
	return syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
}

func freeRing(b []byte) error { return syscall.Munmap(b) }
