package mvcc

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/strata-db/strata/kvpb"
)

// randKey draws short keys over a tiny alphabet rich in the bytes the
// escaping treats specially, so prefixes and zero bytes are frequent.
func randKey(rng *rand.Rand) []byte {
	alphabet := []byte{0x00, 0x01, 0x02, 0xFE, 0xFF, 'a'}
	k := make([]byte, rng.IntN(5))
	for i := range k {
		k[i] = alphabet[rng.IntN(len(alphabet))]
	}
	return k
}

func TestEscapingPreservesOrderAndIsPrefixFree(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		a, b := randKey(rng), randKey(rng)
		ea, eb := appendEscaped(nil, a), appendEscaped(nil, b)
		if got, want := bytes.Compare(ea, eb), bytes.Compare(a, b); got != want {
			t.Fatalf("order of %q, %q: escaped compare %d, raw compare %d", a, b, got, want)
		}
		if !bytes.Equal(a, b) && (bytes.HasPrefix(ea, eb) || bytes.HasPrefix(eb, ea)) {
			t.Fatalf("escaped %q and %q are prefixes of each other", a, b)
		}
		// Versions keep the order of their keys, whatever the timestamps.
		wa, wb := writeKey(a, rng.Uint64()), writeKey(b, rng.Uint64())
		if c := bytes.Compare(a, b); c != 0 && bytes.Compare(wa, wb) != c {
			t.Fatalf("versions of %q and %q interleave", a, b)
		}
		key, rest, err := decodeEscaped(append(ea, 7, 8))
		if err != nil || !bytes.Equal(key, a) || !bytes.Equal(rest, []byte{7, 8}) {
			t.Fatalf("decode(escape(%q)) = %q, %q, %v", a, key, rest, err)
		}
	}
}

func TestDecodeEscapedRejectsMalformedKeys(t *testing.T) {
	for _, b := range [][]byte{{}, {'a'}, {'a', 0}, {0, 2}, {0, 0xFF}} {
		if _, _, err := decodeEscaped(b); err == nil {
			t.Errorf("decodeEscaped(%q) accepted a malformed key", b)
		}
	}
}

func TestWriteKeyOrdersNewestFirst(t *testing.T) {
	k := []byte("k")
	if bytes.Compare(writeKey(k, 20), writeKey(k, 10)) >= 0 {
		t.Fatal("commit ts 20 does not sort before 10")
	}
	key, ts, err := decodeWriteKey(writeKey([]byte("a\x00b"), 42))
	if err != nil || string(key) != "a\x00b" || ts != 42 {
		t.Fatalf("decodeWriteKey = %q, %d, %v", key, ts, err)
	}
}

func TestEngineSpansHoldExactlyTheRange(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 5000 {
		start, end := randKey(rng), randKey(rng)
		if rng.IntN(4) == 0 {
			end = nil
		}
		spans := EngineSpans(start, end)
		if len(spans) != 3 {
			t.Fatalf("%d spans", len(spans))
		}
		for i, s := range spans {
			if s[0][0] != Prefix || s[1][0] != Prefix {
				t.Fatalf("bad span %q", s)
			}
			if i > 0 && bytes.Compare(spans[i-1][1], s[0]) > 0 {
				t.Fatalf("spans overlap or are unordered: %q", spans)
			}
		}
		k := randKey(rng)
		inRange := bytes.Compare(k, start) >= 0 && (len(end) == 0 || bytes.Compare(k, end) < 0)
		in := func(span [2][]byte, ek []byte) bool {
			return bytes.Compare(ek, span[0]) >= 0 && bytes.Compare(ek, span[1]) < 0
		}
		for _, ts := range []uint64{0, 1, math.MaxUint64} {
			if in(spans[0], dataKey(k, ts)) != inRange || in(spans[2], writeKey(k, ts)) != inRange {
				t.Fatalf("key %q ts %d in [%q, %q): span membership wrong", k, ts, start, end)
			}
		}
		if in(spans[1], lockKey(k)) != inRange {
			t.Fatalf("lock of %q in [%q, %q): span membership wrong", k, start, end)
		}
	}
}

func TestTimestampParts(t *testing.T) {
	ts := ComposeTS(1_700_000_000_000, 5)
	if PhysicalMs(ts) != 1_700_000_000_000 || ts&(1<<18-1) != 5 {
		t.Fatalf("ComposeTS/PhysicalMs disagree: %d", ts)
	}
	if ComposeTS(1, 1<<18) != ComposeTS(1, 0) {
		t.Fatal("logical overflow leaks into the physical part")
	}
}

func TestRecordsRoundTrip(t *testing.T) {
	locks := []*lock{
		{typ: kvpb.Op_Put, primary: []byte("p"), startTS: 10, ttl: 3000, forUpdateTS: 12, minCommitTS: 13, txnSize: 2, hasValue: true, value: []byte{}},
		{typ: kvpb.Op_Put, primary: []byte("p\x00"), startTS: math.MaxUint64},
		{typ: kvpb.Op_PessimisticLock, primary: nil, startTS: 1},
	}
	for _, l := range locks {
		got, err := decodeLock(l.encode())
		if err != nil {
			t.Fatal(err)
		}
		if got.typ != l.typ || !bytes.Equal(got.primary, l.primary) || got.startTS != l.startTS || got.ttl != l.ttl ||
			got.forUpdateTS != l.forUpdateTS || got.minCommitTS != l.minCommitTS || got.txnSize != l.txnSize ||
			got.hasValue != l.hasValue || !bytes.Equal(got.value, l.value) {
			t.Fatalf("lock round trip: %+v -> %+v", l, got)
		}
	}
	writes := []write{
		{kind: writePut, startTS: 7, hasValue: true, value: []byte("v")},
		{kind: writePut, startTS: 7},
		{kind: writeRollback, startTS: 9},
		{kind: writeDelete, startTS: 3, overlappedRollback: true},
	}
	for _, w := range writes {
		got, err := decodeWrite(w.encode())
		if err != nil {
			t.Fatal(err)
		}
		if got.kind != w.kind || got.startTS != w.startTS || got.hasValue != w.hasValue ||
			got.overlappedRollback != w.overlappedRollback || !bytes.Equal(got.value, w.value) {
			t.Fatalf("write round trip: %+v -> %+v", w, got)
		}
	}
	if _, err := decodeLock([]byte{99}); err == nil {
		t.Fatal("decodeLock accepted an unknown type")
	}
	if _, err := decodeWrite([]byte{'P'}); err == nil {
		t.Fatal("decodeWrite accepted a truncated record")
	}
}

func TestKeyErrorOf(t *testing.T) {
	if KeyErrorOf(nil) != nil || KeyErrorOf(errors.New("disk on fire")) != nil {
		t.Fatal("engine errors must not become key errors")
	}
	locked := &kvpb.LockInfo{Key: []byte("k"), LockVersion: 3}
	if ke := KeyErrorOf(&LockedError{Lock: locked}); ke.Locked != locked {
		t.Fatalf("locked: %v", ke)
	}
	wc := &kvpb.WriteConflict{Key: []byte("k")}
	if ke := KeyErrorOf(&WriteConflictError{Conflict: wc}); ke.Conflict != wc {
		t.Fatalf("conflict: %v", ke)
	}
	if ke := KeyErrorOf(&AlreadyExistError{Key: []byte("k")}); string(ke.AlreadyExist.GetKey()) != "k" {
		t.Fatalf("already exist: %v", ke)
	}
	if ke := KeyErrorOf(&TxnNotFoundError{StartTS: 4, Primary: []byte("p")}); ke.TxnNotFound.GetStartTs() != 4 {
		t.Fatalf("txn not found: %v", ke)
	}
	// A transaction whose locks are gone may run again; the others abort.
	for _, err := range []error{&TxnLockNotFoundError{}, &AlreadyRolledBackError{}, &PessimisticLockNotFoundError{}} {
		if ke := KeyErrorOf(err); ke == nil || ke.Retryable != err.Error() {
			t.Fatalf("%T: %v", err, ke)
		}
	}
	for _, err := range []error{&AlreadyCommittedError{}, &CommitTSExpiredError{}, &InvalidRequestError{Reason: "x"}} {
		if ke := KeyErrorOf(err); ke == nil || ke.Abort != err.Error() {
			t.Fatalf("%T: %v", err, ke)
		}
	}
}
