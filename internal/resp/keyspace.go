package resp

import (
	"context"
	"errors"

	"github.com/strata-db/strata/internal/kv"
)

// keyspace is the Redis keyspace as one transaction sees it: every command
// (or every MULTI/EXEC) reads and writes through one kv.Txn, so it commits
// atomically and isolated whichever regions its keys live in. now is the
// command's clock (unix ms): a key whose TTL has passed by now does not
// exist for it.
type keyspace struct {
	ctx context.Context
	txn kv.Txn
	now int64
	// maxValue bounds any value a command writes (--max-value-size).
	maxValue int
	// wrote is set by the first write; a command that wrote nothing needs
	// no commit.
	wrote bool
}

// lookupAny returns k's metadata, including an expired one.
func (ks *keyspace) lookupAny(k []byte) (meta, bool, error) {
	b, err := ks.txn.Get(ks.ctx, MetaKey(k))
	if errors.Is(err, kv.ErrNotFound) {
		return meta{}, false, nil
	}
	if err != nil {
		return meta{}, false, err
	}
	m, err := decodeMeta(b)
	return m, err == nil, err
}

// lookup returns k's metadata if k exists (is present and not expired).
func (ks *keyspace) lookup(k []byte) (meta, bool, error) {
	m, ok, err := ks.lookupAny(k)
	if !ok || err != nil || m.expired(ks.now) {
		return meta{}, false, err
	}
	return m, true, nil
}

// lookupType is lookup that fails with WRONGTYPE when k exists with
// another type.
func (ks *keyspace) lookupType(k []byte, t valueType) (meta, bool, error) {
	m, ok, err := ks.lookup(k)
	if err != nil {
		return meta{}, false, err
	}
	return ofType(m, ok, t)
}

// ofType passes live metadata of type t through and fails with WRONGTYPE
// for another type.
func ofType(m meta, live bool, t valueType) (meta, bool, error) {
	if live && m.typ != t {
		return meta{}, false, errWrongType
	}
	return m, live, nil
}

// lookupForWrite is lookupAny for a command about to rewrite k as type t:
// found says whether a record exists (maybe expired), live whether k
// exists; a live k of another type is WRONGTYPE.
func (ks *keyspace) lookupForWrite(k []byte, t valueType) (old meta, found, live bool, err error) {
	old, found, err = ks.lookupAny(k)
	live = found && !old.expired(ks.now)
	if err == nil && live && old.typ != t {
		err = errWrongType
	}
	return old, found, live, err
}

// put writes k's metadata. old is what k held before (found says whether
// it was present at all, expired or not): a hash being replaced by another
// type loses its fields, and the expiry index follows the TTL.
func (ks *keyspace) put(k []byte, m meta, old meta, found bool) error {
	if found && old.typ == typeHash && (m.typ != typeHash || old.expired(ks.now)) {
		if err := ks.deleteFields(k); err != nil {
			return err
		}
	}
	if len(m.payload) > ks.maxValue {
		return errValueTooLarge
	}
	m.stamp = ks.txn.StartTS()
	if found && old.expireAt != 0 && old.expireAt != m.expireAt {
		if err := ks.txn.Delete(expiryKey(old.expireAt, k)); err != nil {
			return err
		}
	}
	if m.expireAt != 0 && (!found || old.expireAt != m.expireAt) {
		if err := ks.txn.Set(expiryKey(m.expireAt, k), nil); err != nil {
			return err
		}
	}
	ks.wrote = true
	return ks.txn.Set(MetaKey(k), m.encode())
}

// remove deletes k (metadata, fields and expiry entry), given its current
// metadata from lookupAny.
func (ks *keyspace) remove(k []byte, old meta) error {
	if old.typ == typeHash {
		if err := ks.deleteFields(k); err != nil {
			return err
		}
	}
	if old.expireAt != 0 {
		if err := ks.txn.Delete(expiryKey(old.expireAt, k)); err != nil {
			return err
		}
	}
	ks.wrote = true
	return ks.txn.Delete(MetaKey(k))
}

// del deletes k if it exists and reports whether it did. An expired key is
// cleaned up but does not count.
func (ks *keyspace) del(k []byte) (bool, error) {
	m, ok, err := ks.lookupAny(k)
	if !ok || err != nil {
		return false, err
	}
	if err := ks.remove(k, m); err != nil {
		return false, err
	}
	return !m.expired(ks.now), nil
}

func (ks *keyspace) deleteFields(k []byte) error {
	p := fieldPrefix(k)
	ks.wrote = true
	return ks.fields(k, func(f, _ []byte) error { return ks.txn.Delete(fieldKey(p, f)) })
}

// setString makes k the string v with expireAt (0: no TTL), whatever k
// held before.
func (ks *keyspace) setString(k, v []byte, expireAt int64) error {
	old, found, err := ks.lookupAny(k)
	if err != nil {
		return err
	}
	return ks.put(k, meta{typ: typeString, expireAt: expireAt, payload: v}, old, found)
}

// getField returns a field of hash k (whose live metadata the caller
// checked).
func (ks *keyspace) getField(k, field []byte) ([]byte, bool, error) {
	v, err := ks.txn.Get(ks.ctx, fieldKey(fieldPrefix(k), field))
	if errors.Is(err, kv.ErrNotFound) {
		return nil, false, nil
	}
	return v, err == nil, err
}

// fields calls fn for each field of hash k in field order.
func (ks *keyspace) fields(k []byte, fn func(field, value []byte) error) error {
	p := fieldPrefix(k)
	it, err := ks.txn.Iter(ks.ctx, p, prefixEnd(p), false)
	if err != nil {
		return err
	}
	defer it.Close()
	for it.Valid() {
		if err := fn(it.Key()[len(p):], it.Value()); err != nil {
			return err
		}
		if err := it.Next(ks.ctx); err != nil {
			return err
		}
	}
	return nil
}

// hashWriter edits one hash: it tracks the field count and writes the
// metadata once at the end.
type hashWriter struct {
	ks     *keyspace
	key    []byte
	prefix []byte
	old    meta
	found  bool // metadata present (possibly expired, possibly another type)
	m      meta
}

// openHash prepares writes to hash k, creating it if absent or expired.
func (ks *keyspace) openHash(k []byte) (*hashWriter, error) {
	old, found, err := ks.lookupAny(k)
	if err != nil {
		return nil, err
	}
	h := &hashWriter{ks: ks, key: k, prefix: fieldPrefix(k), old: old, found: found}
	if found && !old.expired(ks.now) {
		if old.typ != typeHash {
			return nil, errWrongType
		}
		h.m = old
	} else {
		if found && old.typ == typeHash {
			// The expired hash's fields are not part of the new one.
			if err := ks.deleteFields(k); err != nil {
				return nil, err
			}
			h.old.typ = typeString // fields already gone; put must not rescan
		}
		h.m = meta{typ: typeHash, payload: hashPayload(0)}
	}
	return h, nil
}

func (h *hashWriter) live() bool { return h.m.hashLen() > 0 }

func (h *hashWriter) get(field []byte) ([]byte, bool, error) {
	if !h.live() {
		return nil, false, nil
	}
	return h.ks.getField(h.key, field)
}

// set writes a field and reports whether it is new.
func (h *hashWriter) set(field, value []byte) (bool, error) {
	if len(value) > h.ks.maxValue {
		return false, errValueTooLarge
	}
	_, exists, err := h.get(field)
	if err != nil {
		return false, err
	}
	if err := h.ks.txn.Set(fieldKey(h.prefix, field), value); err != nil {
		return false, err
	}
	h.ks.wrote = true
	if !exists {
		h.m.payload = hashPayload(h.m.hashLen() + 1)
	}
	return !exists, nil
}

// del removes a field and reports whether it existed.
func (h *hashWriter) del(field []byte) (bool, error) {
	_, exists, err := h.get(field)
	if !exists || err != nil {
		return false, err
	}
	if err := h.ks.txn.Delete(fieldKey(h.prefix, field)); err != nil {
		return false, err
	}
	h.m.payload = hashPayload(h.m.hashLen() - 1)
	return true, nil
}

// close writes the hash's metadata, or deletes the key when the last field
// is gone (Redis has no empty hashes).
func (h *hashWriter) close() error {
	if !h.live() {
		if h.found {
			return h.ks.remove(h.key, h.old)
		}
		return nil
	}
	return h.ks.put(h.key, h.m, h.old, h.found)
}
