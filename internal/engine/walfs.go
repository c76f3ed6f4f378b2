package engine

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus"
)

// The Raft engine's write-ahead log is where every acknowledged write
// waits: one group-commit round is one WAL write and one sync. How that
// sync is made decides the latency of every commit. Measured on the 2-core
// VMs we benchmark on (4 KiB writes, p50):
//
//	                               idle       another writer busy on the disk
//	append + fdatasync             0.40 ms    0.53-0.89 ms (p90 3.8-6 ms)
//	overwrite + fdatasync          0.21 ms    0.20-0.22 ms (p90 0.4-1.5 ms)
//	O_DIRECT|O_DSYNC overwrite     0.19 ms    0.14-0.19 ms (p90 0.19-0.29 ms)
//
// An append must also journal the file's new size (and an fdatasync on
// ext4 then waits for the journal commit, which other files' writes share);
// an overwrite of blocks already written and allocated changes no metadata,
// and a direct, data-synchronous write goes to the device without the page
// cache and returns durable. InnoDB writes its redo log that way, into a
// preallocated file.
//
// Pebble appends to a new WAL file until it has recycled enough old ones
// (after MemTableStopWritesThreshold+1 memtables, 320 MiB of Raft log
// here), and at every open it deletes the logs it finds instead of
// recycling them. walFS closes both gaps, as raft-engine's
// prefill-for-recycle does for TiKV:
//
//   - a WAL Pebble creates is a spare file taken from dir/wal-spare: zeros
//     written and synced to walFileSize, renamed into place;
//   - a WAL whose blocks are all written (a spare, or a log Pebble
//     recycles) is written through an O_DIRECT|O_DSYNC descriptor
//     (directFile): each write is durable when it returns, so the sync
//     Pebble then asks for has nothing left to do;
//   - a WAL Pebble deletes becomes a spare (up to maxSpares) rather than
//     free space: its blocks are written, its old records carry an older
//     log number, which Pebble's reader treats as the end of the log;
//   - when a WAL is opened and no spare is left, one more is zero-filled
//     in the background (not for the first WAL, which Pebble opens with
//     the DB: a store that is opened and not written fills nothing).
//
// Without a spare, or where O_DIRECT is refused (tmpfs), a WAL is an
// ordinary file and Pebble syncs it with fdatasync as before.
type walFS struct {
	vfs.FS
	dir       string // the engine directory: Pebble's WALs are dir/NNNNNN.log
	spareDir  string
	fileSize  int64 // size a spare is filled to: about one memtable of log
	maxSpares int

	mu      sync.Mutex
	spares  []string // ready spares, oldest first
	seq     int      // last spare file number used
	filling bool
	opens   int // WALs opened by Pebble
	closed  bool
	fillWG  sync.WaitGroup
	direct  bool // false once O_DIRECT was refused on this filesystem
}

const (
	spareDirName = "wal-spare"
	maxWALSpares = 2
)

var metricWALFiles = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: "strata", Subsystem: "engine", Name: "raft_wal_files_total",
	Help: "Raft-engine WAL files opened, by how they are written: direct (O_DIRECT|O_DSYNC over written blocks) or buffered (appended, then fdatasync).",
}, []string{"mode"})

var metricWALWriteSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
	Namespace: "strata", Subsystem: "engine", Name: "raft_wal_write_seconds",
	Help:    "Latency of one durable (O_DIRECT|O_DSYNC) write of Raft-engine WAL pages: the device's share of a group commit.",
	Buckets: prometheus.ExponentialBuckets(0.00005, 2, 16),
})

func init() { prometheus.MustRegister(metricWALFiles, metricWALWriteSeconds) }

// walWriteNanos is the time, in nanoseconds, threads of this process have
// spent inside durable (O_DIRECT|O_DSYNC) WAL writes.
var walWriteNanos atomic.Int64

// WALWriteTime returns the total time this process has spent blocked in
// durable writes of Raft-engine WALs. It grows only for WALs written
// through directFile; an fdatasync of an ordinary file is not counted.
func WALWriteTime() time.Duration { return time.Duration(walWriteNanos.Load()) }

// newWALFS wraps fs for the engine in dir. Spares left by an earlier run
// are kept; a fill that was interrupted (*.tmp) is removed.
func newWALFS(fs vfs.FS, dir string, fileSize int64) (*walFS, error) {
	w := &walFS{
		FS:        fs,
		dir:       filepath.Clean(dir),
		spareDir:  filepath.Join(dir, spareDirName),
		fileSize:  fileSize,
		maxSpares: maxWALSpares,
		direct:    directFlags != 0,
	}
	if err := fs.MkdirAll(w.spareDir, 0o755); err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	names, err := fs.List(w.spareDir)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	slices.Sort(names)
	for _, name := range names {
		path := filepath.Join(w.spareDir, name)
		n, ok := strings.CutSuffix(name, ".spare")
		seq, err := strconv.Atoi(n)
		if !ok || err != nil || len(w.spares) >= w.maxSpares {
			if err := fs.Remove(path); err != nil {
				return nil, fmt.Errorf("engine: %w", err)
			}
			continue
		}
		w.spares = append(w.spares, path)
		w.seq = max(w.seq, seq)
	}
	return w, nil
}

func (w *walFS) isWAL(name string) bool {
	return strings.HasSuffix(name, ".log") && filepath.Dir(filepath.Clean(name)) == w.dir
}

// Create hands Pebble a spare for a new WAL when one is ready.
func (w *walFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	if !w.isWAL(name) {
		return w.FS.Create(name, category)
	}
	defer w.opened()
	if f, ok := w.fromSpare(name, category); ok {
		return f, nil
	}
	f, err := w.FS.Create(name, category)
	if err != nil {
		return nil, err
	}
	metricWALFiles.WithLabelValues("buffered").Inc()
	return f, nil
}

// fromSpare renames a spare to name and opens it, if one is ready.
func (w *walFS) fromSpare(name string, category vfs.DiskWriteCategory) (vfs.File, bool) {
	spare := w.takeSpare()
	if spare == "" {
		return nil, false
	}
	if err := w.FS.Rename(spare, name); err != nil {
		slog.Warn("engine: could not use a spare WAL file", "spare", spare, "err", err)
		return nil, false
	}
	f, err := w.openWritten(name, category)
	if err != nil {
		slog.Warn("engine: could not open a spare WAL file", "file", name, "err", err)
		return nil, false
	}
	return f, true
}

// ReuseForWrite is Pebble recycling an obsolete WAL. Its blocks are
// written, but it may be one of the small logs of Pebble's first
// memtables (they start at 256 KiB and double): a spare replaces one of
// those, so the new log is not appended past the old one's end.
func (w *walFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	if !w.isWAL(newname) {
		return w.FS.ReuseForWrite(oldname, newname, category)
	}
	defer w.opened()
	if st, err := w.FS.Stat(oldname); err == nil && st.Size() < w.fileSize/2 {
		if f, ok := w.fromSpare(newname, category); ok {
			return f, w.FS.Remove(oldname)
		}
	}
	if err := w.FS.Rename(oldname, newname); err != nil {
		return nil, err
	}
	return w.openWritten(newname, category)
}

// Remove keeps a deleted WAL as a spare while there is room for one.
func (w *walFS) Remove(name string) error {
	if !w.isWAL(name) || !w.keepAsSpare(name) {
		return w.FS.Remove(name)
	}
	return nil
}

// openWritten opens a WAL whose blocks are already written: directly when
// the filesystem allows, else as an ordinary file (its overwrites still
// need no metadata journaling).
func (w *walFS) openWritten(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	w.mu.Lock()
	direct := w.direct
	w.mu.Unlock()
	if direct {
		f, err := openDirect(name)
		if err == nil {
			metricWALFiles.WithLabelValues("direct").Inc()
			return f, nil
		}
		slog.Warn("engine: the filesystem refuses O_DIRECT; Raft WAL files are written through the page cache", "file", name, "err", err)
		w.mu.Lock()
		w.direct = false
		w.mu.Unlock()
	}
	f, err := w.FS.OpenReadWrite(name, category)
	if err != nil {
		return nil, err
	}
	metricWALFiles.WithLabelValues("buffered").Inc()
	return f, nil
}

func (w *walFS) takeSpare() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.spares) == 0 {
		return ""
	}
	s := w.spares[0]
	w.spares = w.spares[1:]
	return s
}

func (w *walFS) keepAsSpare(name string) bool {
	st, err := w.FS.Stat(name)
	if err != nil || st.Size() < w.fileSize/2 {
		return false // too small to be worth keeping
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || len(w.spares) >= w.maxSpares {
		return false
	}
	w.seq++
	spare := filepath.Join(w.spareDir, fmt.Sprintf("%06d.spare", w.seq))
	if err := w.FS.Rename(name, spare); err != nil {
		return false
	}
	w.spares = append(w.spares, spare)
	return true
}

// opened is told that Pebble opened a WAL. From the second one on (the
// engine is being written to, not just opened), a spare is kept ready:
// when none is left, one is filled in the background.
func (w *walFS) opened() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.opens++
	if w.opens < 2 || w.closed || w.filling || len(w.spares) > 0 {
		return
	}
	w.filling = true
	w.seq++
	seq := w.seq
	w.fillWG.Add(1)
	go func() {
		defer w.fillWG.Done()
		path, err := w.fill(seq)
		w.mu.Lock()
		defer w.mu.Unlock()
		w.filling = false
		if err != nil {
			slog.Warn("engine: could not prepare a spare WAL file", "err", err)
			return
		}
		w.spares = append(w.spares, path)
	}()
}

// fill writes zeros to a new spare up to fileSize, syncs it, and renames
// it into the spare directory, so that a crash never leaves a half-filled
// spare under a spare's name.
func (w *walFS) fill(seq int) (string, error) {
	tmp := filepath.Join(w.spareDir, fmt.Sprintf("%06d.tmp", seq))
	f, direct, err := w.createFill(tmp)
	if err != nil {
		return "", err
	}
	zeros := alignedBuffer(1 << 20)
	for n := int64(0); n < w.fileSize; n += int64(len(zeros)) {
		if w.isClosed() {
			err = errors.New("closed")
			break
		}
		if _, err = f.Write(zeros); err != nil {
			break
		}
		// Through the page cache: write back as we go rather than leave
		// 64 MiB of dirty pages for one sync to push out in front of the
		// WAL's own writes.
		if bf, ok := f.(vfs.File); ok && !direct && n%(8<<20) == 0 {
			if _, err = bf.SyncTo(n); err != nil {
				break
			}
		}
	}
	if err == nil {
		err = f.Sync()
	}
	if err2 := f.Close(); err == nil {
		err = err2
	}
	path := filepath.Join(w.spareDir, fmt.Sprintf("%06d.spare", seq))
	if err == nil {
		err = w.FS.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(w.FS, w.spareDir)
	}
	if err != nil {
		_ = w.FS.Remove(tmp)
		return "", err
	}
	return path, nil
}

// fillFile is a spare being filled.
type fillFile interface {
	io.Writer
	Sync() error
	Close() error
}

// createFill creates a spare to fill, written with O_DIRECT (direct) where
// the filesystem allows. A fill through the page cache showed as 7% of a
// CPU profile of sysbench oltp_update_index it fell into; written directly,
// a 72 MiB fill costs the filler about half the CPU, leaves no writeback to
// kernel threads and displaces no cached pages.
func (w *walFS) createFill(name string) (f fillFile, direct bool, err error) {
	w.mu.Lock()
	direct = w.direct
	w.mu.Unlock()
	if direct {
		if f, err := createDirect(name); err == nil {
			return f, true, nil
		}
	}
	f, err = w.FS.Create(name, vfs.WriteCategoryUnspecified)
	return f, false, err
}

func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if err2 := d.Close(); err == nil {
		err = err2
	}
	return err
}

func (w *walFS) isClosed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.closed
}

// close stops filling (after the engine is closed) and waits for a fill in
// progress to end.
func (w *walFS) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.fillWG.Wait()
}

// directAlign is the alignment O_DIRECT needs of offsets, lengths and
// buffers: the page size, a multiple of every logical block size in use.
const directAlign = 4096

// directFile writes a WAL sequentially through an O_DIRECT|O_DSYNC
// descriptor. Pebble's log writer writes whatever it has of its current
// 32 KiB block, at any length, so every write rewrites the partial page it
// starts in (kept in buf) together with the new bytes, padded with zeros
// to a whole page. Rewriting the page leaves its earlier bytes as they
// were even if the write is torn: every sector holds either its old or its
// new contents, and the two agree on them.
type directFile struct {
	f   *os.File
	off int64  // bytes written
	buf []byte // aligned; buf[:off%directAlign] holds the partial last page
}

func (d *directFile) Write(p []byte) (int, error) {
	pageStart := d.off &^ (directAlign - 1)
	head := int(d.off - pageStart)
	end := head + len(p)
	padded := (end + directAlign - 1) &^ (directAlign - 1)
	if padded > len(d.buf) {
		nb := alignedBuffer(max(padded, 2*len(d.buf)))
		copy(nb, d.buf[:head])
		d.buf = nb
	}
	copy(d.buf[head:], p)
	clear(d.buf[end:padded])
	start := time.Now()
	for done := 0; done < padded; {
		n, err := d.f.WriteAt(d.buf[done:padded], pageStart+int64(done))
		if err != nil {
			return 0, err
		}
		done += n
	}
	took := time.Since(start)
	walWriteNanos.Add(int64(took))
	metricWALWriteSeconds.Observe(took.Seconds())
	d.off += int64(len(p))
	last := end &^ (directAlign - 1)
	copy(d.buf, d.buf[last:end])
	return len(p), nil
}

// alignedBuffer returns n (a multiple of directAlign) bytes starting at an
// address that is a multiple of directAlign.
func alignedBuffer(n int) []byte {
	b := make([]byte, n+directAlign)
	skip := 0
	if r := alignmentOf(b); r != 0 {
		skip = directAlign - r
	}
	return b[skip : skip+n : skip+n]
}

var errDirectNoRead = errors.New("engine: a WAL open for direct writing is not read through that handle")

func (d *directFile) Read([]byte) (int, error)           { return 0, errDirectNoRead }
func (d *directFile) ReadAt([]byte, int64) (int, error)  { return 0, errDirectNoRead }
func (d *directFile) WriteAt([]byte, int64) (int, error) { return 0, errors.ErrUnsupported }
func (d *directFile) Close() error                       { return d.f.Close() }

// The blocks are preallocated by being written, and every write returns
// durable (O_DSYNC): there is nothing to preallocate or sync.
func (d *directFile) Preallocate(offset, length int64) error { return nil }
func (d *directFile) Sync() error                            { return nil }
func (d *directFile) SyncData() error                        { return nil }
func (d *directFile) SyncTo(int64) (bool, error)             { return true, nil }
func (d *directFile) Prefetch(int64, int64) error            { return nil }
func (d *directFile) Fd() uintptr                            { return vfs.InvalidFd }

func (d *directFile) Stat() (vfs.FileInfo, error) {
	return vfs.Default.Stat(d.f.Name())
}

var _ io.Writer = (*directFile)(nil)

func alignmentOf(b []byte) int {
	return int(uintptr(unsafe.Pointer(unsafe.SliceData(b))) & (directAlign - 1))
}
