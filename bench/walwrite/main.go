//go:build linux

// Command walwrite measures how a disk serves durable log writes: 4 KiB
// O_DIRECT|O_DSYNC page writes (what the Raft engine's WAL issues, one per
// group commit) with 1, 2, 3 and 4 writes in flight. It prints the writes
// per second and the mean latency of each.
//
//	go run ./bench/walwrite -dir /path/on/the/disk/under/test
//
// A group commit keeps one write in flight: a transaction that arrives
// during a write waits for it and then for the next one. If the device
// serves two concurrent writes in about the time of one, a log that keeps
// two in flight would cut that wait (see docs/benchmarks.md).
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

const page = 4096

func main() {
	dir := flag.String("dir", os.TempDir(), "directory on the disk to measure")
	writes := flag.Int("writes", 2000, "writes per writer and run")
	flag.Parse()
	path := filepath.Join(*dir, "walwrite.tmp")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|syscall.O_DIRECT|syscall.O_DSYNC, 0o600)
	if err != nil {
		log.Fatal(err)
	}
	defer os.Remove(path)
	defer f.Close()
	const region = 16 << 20 // per writer, written once first so writes overwrite allocated blocks
	const maxWriters = 4
	chunk := alignedPage(1 << 20)
	for off := int64(0); off < maxWriters*region; off += int64(len(chunk)) {
		if _, err := f.WriteAt(chunk, off); err != nil {
			log.Fatal(err)
		}
	}
	for inFlight := 1; inFlight <= maxWriters; inFlight++ {
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			total time.Duration
		)
		start := time.Now()
		for w := 0; w < inFlight; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				buf := alignedPage(page)
				var sum time.Duration
				for i := 0; i < *writes; i++ {
					off := int64(w)*region + int64(i%(region/page))*page
					t := time.Now()
					if _, err := f.WriteAt(buf, off); err != nil {
						log.Fatal(err)
					}
					sum += time.Since(t)
				}
				mu.Lock()
				total += sum
				mu.Unlock()
			}(w)
		}
		wg.Wait()
		n := inFlight * *writes
		fmt.Printf("%d in flight: %6.0f writes/s, mean latency %4.0f us\n", inFlight,
			float64(n)/time.Since(start).Seconds(), float64(total.Microseconds())/float64(n))
	}
}

// alignedPage returns n bytes (a multiple of the page size) at a
// page-aligned address, as O_DIRECT requires.
func alignedPage(n int) []byte {
	b := make([]byte, n+page)
	skip := (page - int(uintptr(unsafe.Pointer(&b[0]))%page)) % page
	return b[skip : skip+n : skip+n]
}
