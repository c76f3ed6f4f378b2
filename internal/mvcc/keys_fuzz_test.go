package mvcc

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// FuzzWriteKey: decoding arbitrary bytes as a write-column key never panics;
// whatever decodes re-encodes to the same bytes; and write keys order by
// user key, then newest commit first.
func FuzzWriteKey(f *testing.F) {
	f.Add([]byte("a"), []byte("b"), uint64(5), uint64(7), writeKey([]byte("a\x00b"), 9))
	f.Add([]byte{}, []byte{0}, uint64(0), uint64(1<<63), []byte{Prefix, writeCF, 0, 1})
	f.Add([]byte{0, 0xff}, []byte{0, 0xff, 0}, uint64(1), uint64(1), []byte{Prefix, writeCF, 0, 0xff, 0, 2, 1, 2, 3, 4, 5, 6, 7, 8})
	f.Fuzz(func(t *testing.T, a, b []byte, ta, tb uint64, raw []byte) {
		if key, ts, err := decodeWriteKey(raw); err == nil {
			if again := writeKey(key, ts); !bytes.Equal(again, raw) {
				t.Fatalf("decodeWriteKey(%x) = %x@%d, which encodes as %x", raw, key, ts, again)
			}
		}
		if key, rest, err := decodeEscaped(raw); err == nil {
			if again := appendEscaped(nil, key); !bytes.Equal(append(again, rest...), raw) {
				t.Fatalf("decodeEscaped(%x) = %x + %x, which encodes as %x", raw, key, rest, again)
			}
		}
		ka, kb := writeKey(a, ta), writeKey(b, tb)
		for _, c := range []struct {
			k   []byte
			key []byte
			ts  uint64
		}{{ka, a, ta}, {kb, b, tb}} {
			key, ts, err := decodeWriteKey(c.k)
			if err != nil || !bytes.Equal(key, c.key) || ts != c.ts {
				t.Fatalf("round trip of %x@%d: %x@%d, %v", c.key, c.ts, key, ts, err)
			}
		}
		want := bytes.Compare(a, b)
		if want == 0 {
			// Same user key: the newer commit sorts first.
			switch {
			case ta > tb:
				want = -1
			case ta < tb:
				want = 1
			}
		}
		if got := bytes.Compare(ka, kb); got != want {
			t.Fatalf("order of %x@%d and %x@%d: engine keys compare %d, want %d", a, ta, b, tb, got, want)
		}
		if binary.BigEndian.Uint64(ka[len(ka)-8:]) != ^ta {
			t.Fatalf("timestamp suffix of %x", ka)
		}
	})
}
