package engine

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// directSupported skips tests of direct writes where the filesystem
// refuses O_DIRECT.
func directSupported(t *testing.T, dir string) {
	t.Helper()
	p := filepath.Join(dir, "probe")
	if err := os.WriteFile(p, make([]byte, directAlign), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := openDirect(p)
	if err != nil {
		t.Skipf("no O_DIRECT here: %v", err)
	}
	f.Close()
	os.Remove(p)
}

// Writes of every length, at every offset within a page, land in order;
// the rest of the page after the last byte is zero, and what lies beyond
// the page is left as it was.
func TestDirectFileWrites(t *testing.T) {
	dir := t.TempDir()
	directSupported(t, dir)
	rng := rand.New(rand.NewPCG(1, 2))
	const size = 1 << 20
	old := bytes.Repeat([]byte{0xAB}, size) // a recycled file's stale bytes
	p := filepath.Join(dir, "wal")
	if err := os.WriteFile(p, old, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := openDirect(p)
	if err != nil {
		t.Fatal(err)
	}
	var want []byte
	for len(want) < size-70_000 {
		n := rng.IntN(9000)
		switch rng.IntN(4) {
		case 0:
			n = rng.IntN(10)
		case 1:
			n = directAlign - len(want)%directAlign // exactly to the page end
		}
		chunk := make([]byte, n)
		for i := range chunk {
			chunk[i] = byte(rng.IntN(255) + 1)
		}
		if got, err := f.Write(chunk); err != nil || got != n {
			t.Fatalf("Write(%d) = %d, %v", n, got, err)
		}
		want = append(want, chunk...)
	}
	// Durable on return: Sync has nothing to do, and the bytes are on the
	// file already, read through another descriptor.
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[:len(want)], want) {
		t.Fatal("file does not hold the bytes written, in order")
	}
	pageEnd := (len(want) + directAlign - 1) &^ (directAlign - 1)
	if !bytes.Equal(got[len(want):pageEnd], make([]byte, pageEnd-len(want))) {
		t.Fatal("the last page is not zero after the data")
	}
	if !bytes.Equal(got[pageEnd:], old[pageEnd:]) || len(got) != size {
		t.Fatal("bytes past the last page written were changed")
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// testDB opens a Pebble DB on a walFS with small memtables, so that its
// WALs rotate, get deleted and recycled within a test.
func testDB(t *testing.T, dir string) (*pebble.DB, *walFS) {
	t.Helper()
	w, err := newWALFS(vfs.Default, dir, 600<<10)
	if err != nil {
		t.Fatal(err)
	}
	db, err := pebble.Open(dir, &pebble.Options{
		FS:                          w,
		MemTableSize:                512 << 10,
		MemTableStopWritesThreshold: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	return db, w
}

// Everything committed with Sync through WALs written directly is there
// after a reopen, and after a copy of the directory taken while the DB was
// open (what a crash leaves: only what reached the disk). WALs come from
// filled spares, from Pebble's recycling and from deleted logs kept as
// spares across the reopen.
func TestWALFSPebbleRoundTrip(t *testing.T) {
	dir := t.TempDir()
	directSupported(t, dir)
	direct0 := testutil.ToFloat64(metricWALFiles.WithLabelValues("direct"))

	db, w := testDB(t, dir)
	val := bytes.Repeat([]byte("v"), 700)
	key := func(i int) []byte { return fmt.Appendf(nil, "k%08d", i) }
	const n = 20_000 // about 14 MiB of WAL: many rotations
	for i := range n {
		if err := db.Set(key(i), val, pebble.Sync); err != nil {
			t.Fatal(err)
		}
		if i%1000 == 999 { // spares are filled in the background
			w.fillWG.Wait()
		}
	}
	if got := testutil.ToFloat64(metricWALFiles.WithLabelValues("direct")) - direct0; got < 5 {
		t.Fatalf("only %v WALs were written directly", got)
	}

	crash := t.TempDir()
	copyDir(t, dir, crash)
	for _, d := range []string{crash} {
		checkKeys(t, d, n, key, val)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	w.close()
	checkKeys(t, dir, n, key, val)
}

func checkKeys(t *testing.T, dir string, n int, key func(int) []byte, val []byte) {
	t.Helper()
	db, w := testDB(t, dir)
	defer w.close()
	defer db.Close()
	for i := range n {
		v, c, err := db.Get(key(i))
		if err != nil {
			t.Fatalf("%s: key %d: %v", dir, i, err)
		}
		if !bytes.Equal(v, val) {
			t.Fatalf("%s: key %d: wrong value", dir, i)
		}
		c.Close()
	}
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		if d.Name() == "LOCK" {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A deleted WAL becomes a spare (while there is room), a new WAL takes
// one, and at open leftover spares are kept and interrupted fills removed.
func TestWALFSSpares(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, spareDirName), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"000003.spare", "000004.tmp", "junk"} {
		if err := os.WriteFile(filepath.Join(dir, spareDirName, name), make([]byte, 4096), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	w, err := newWALFS(vfs.Default, dir, 8192)
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	if ls := listDir(t, filepath.Join(dir, spareDirName)); fmt.Sprint(ls) != "[000003.spare]" {
		t.Fatalf("spares after open: %v", ls)
	}
	// A new WAL is the spare, renamed.
	f, err := w.Create(filepath.Join(dir, "000010.log"), vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if ls := listDir(t, filepath.Join(dir, spareDirName)); len(ls) != 0 {
		t.Fatalf("spare not taken: %v", ls)
	}
	if st, err := os.Stat(filepath.Join(dir, "000010.log")); err != nil || st.Size() != 4096 {
		t.Fatalf("WAL is not the spare: %v %v", st, err)
	}
	// Deleting it keeps it; a small WAL and other files are deleted.
	if err := w.Remove(filepath.Join(dir, "000010.log")); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "000011.log"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(dir, "000012.sst"), make([]byte, 8192), 0o644)
	for _, name := range []string{"000011.log", "000012.sst"} {
		if err := w.Remove(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if ls := listDir(t, filepath.Join(dir, spareDirName)); fmt.Sprint(ls) != "[000004.spare]" {
		t.Fatalf("spares after removals: %v", ls)
	}
	if ls := listDir(t, dir); fmt.Sprint(ls) != fmt.Sprint([]string{spareDirName}) {
		t.Fatalf("engine dir after removals: %v", ls)
	}
	// The second WAL opened takes the last spare, and another is filled
	// since none is left.
	f, err = w.Create(filepath.Join(dir, "000013.log"), vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	w.fillWG.Wait()
	ls := listDir(t, filepath.Join(dir, spareDirName))
	if len(ls) != 1 {
		t.Fatalf("spares after growth: %v", ls)
	}
	st, err := os.Stat(filepath.Join(dir, spareDirName, ls[0]))
	if err != nil || st.Size() < w.fileSize {
		t.Fatalf("filled spare: %v %v", st, err)
	}
	// Written (with O_DIRECT where the filesystem allows) as zeros.
	if data, err := os.ReadFile(filepath.Join(dir, spareDirName, ls[0])); err != nil || bytes.ContainsFunc(data, func(r rune) bool { return r != 0 }) {
		t.Fatalf("filled spare is not zeros: %v", err)
	}

	// Pebble recycling a small log gets the spare instead; the small log
	// is deleted.
	os.WriteFile(filepath.Join(dir, "000014.log"), []byte("small"), 0o644)
	f, err = w.ReuseForWrite(filepath.Join(dir, "000014.log"), filepath.Join(dir, "000015.log"), vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	w.fillWG.Wait() // and one more is filled
	if ls := listDir(t, dir); fmt.Sprint(ls) != fmt.Sprint([]string{"000013.log", "000015.log", spareDirName}) {
		t.Fatalf("engine dir after reuse: %v", ls)
	}
	if st, err := os.Stat(filepath.Join(dir, "000015.log")); err != nil || st.Size() < w.fileSize {
		t.Fatalf("recycled small WAL was not replaced by a spare: %v %v", st, err)
	}
	if ls := listDir(t, filepath.Join(dir, spareDirName)); len(ls) != 1 {
		t.Fatalf("spares after reuse: %v", ls)
	}
}

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}
