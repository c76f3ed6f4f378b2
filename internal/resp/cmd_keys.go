package resp

import (
	"bytes"
	"context"
	"math"
	"strconv"
)

func init() {
	ks := []string{"@keyspace"}
	register(
		&command{name: "del", arity: -2, flags: flagData | flagWrite, firstKey: 1, lastKey: -1, step: 1, acl: ks, run: cmdDel},
		&command{name: "unlink", arity: -2, flags: flagData | flagWrite | flagFast, firstKey: 1, lastKey: -1, step: 1, acl: ks, run: cmdDel},
		&command{name: "exists", arity: -2, flags: flagData | flagReadonly | flagFast, firstKey: 1, lastKey: -1, step: 1, acl: ks, run: cmdExists},
		&command{name: "type", arity: 2, flags: flagData | flagReadonly | flagFast, firstKey: 1, lastKey: 1, step: 1, acl: ks, run: cmdType},
		&command{name: "rename", arity: 3, flags: flagData | flagWrite, firstKey: 1, lastKey: 2, step: 1, acl: ks, run: cmdRename},
		&command{name: "renamenx", arity: 3, flags: flagData | flagWrite | flagFast, firstKey: 1, lastKey: 2, step: 1, acl: ks, run: cmdRename},
		&command{name: "expire", arity: -3, flags: flagData | flagWrite | flagFast, firstKey: 1, lastKey: 1, step: 1, acl: ks, run: cmdExpire},
		&command{name: "pexpire", arity: -3, flags: flagData | flagWrite | flagFast, firstKey: 1, lastKey: 1, step: 1, acl: ks, run: cmdExpire},
		&command{name: "expireat", arity: -3, flags: flagData | flagWrite | flagFast, firstKey: 1, lastKey: 1, step: 1, acl: ks, run: cmdExpire},
		&command{name: "pexpireat", arity: -3, flags: flagData | flagWrite | flagFast, firstKey: 1, lastKey: 1, step: 1, acl: ks, run: cmdExpire},
		&command{name: "ttl", arity: 2, flags: flagData | flagReadonly | flagFast, firstKey: 1, lastKey: 1, step: 1, acl: ks, run: cmdTTL},
		&command{name: "pttl", arity: 2, flags: flagData | flagReadonly | flagFast, firstKey: 1, lastKey: 1, step: 1, acl: ks, run: cmdTTL},
		&command{name: "expiretime", arity: 2, flags: flagData | flagReadonly | flagFast, firstKey: 1, lastKey: 1, step: 1, acl: ks, run: cmdTTL},
		&command{name: "pexpiretime", arity: 2, flags: flagData | flagReadonly | flagFast, firstKey: 1, lastKey: 1, step: 1, acl: ks, run: cmdTTL},
		&command{name: "persist", arity: 2, flags: flagData | flagWrite | flagFast, firstKey: 1, lastKey: 1, step: 1, acl: ks, run: cmdPersist},
		&command{name: "scan", arity: -2, flags: flagData | flagReadonly, acl: ks, run: cmdScan},
		&command{name: "keys", arity: 2, flags: flagData | flagReadonly, acl: ks, run: cmdKeys},
		&command{name: "dbsize", arity: 1, flags: flagData | flagReadonly | flagFast, acl: ks, run: cmdDBSize},
		&command{name: "flushdb", arity: -1, flags: flagWrite, acl: ks, run: cmdFlush},
		&command{name: "flushall", arity: -1, flags: flagWrite, acl: ks, run: cmdFlush},
	)
}

// countKeys replies how many of the key arguments fn counts.
func countKeys(x *call, fn func(k []byte) (bool, error)) error {
	var n int64
	for _, k := range x.args[1:] {
		ok, err := fn(k)
		if err != nil {
			return err
		}
		if ok {
			n++
		}
	}
	x.w.WriteInt(n)
	return nil
}

func cmdDel(x *call) error { return countKeys(x, x.ks.del) }

func cmdExists(x *call) error {
	return countKeys(x, func(k []byte) (bool, error) {
		_, ok, err := x.ks.lookup(k)
		return ok, err
	})
}

func cmdType(x *call) error {
	m, ok, err := x.ks.lookup(x.args[1])
	if err != nil {
		return err
	}
	if !ok {
		x.w.WriteSimple("none")
		return nil
	}
	x.w.WriteSimple(m.typ.String())
	return nil
}

func cmdRename(x *call) error {
	nx := x.cmd.name == "renamenx"
	src, dst := x.args[1], x.args[2]
	m, ok, err := x.ks.lookup(src)
	if err != nil {
		return err
	}
	if !ok {
		return errNoSuchKey
	}
	if bytes.Equal(src, dst) {
		if nx {
			x.w.WriteInt(0)
		} else {
			x.w.WriteSimple("OK")
		}
		return nil
	}
	old, found, err := x.ks.lookupAny(dst)
	if err != nil {
		return err
	}
	if nx && found && !old.expired(x.ks.now) {
		x.w.WriteInt(0)
		return nil
	}
	if found {
		if err := x.ks.remove(dst, old); err != nil {
			return err
		}
	}
	if m.typ == typeHash {
		dp := fieldPrefix(dst)
		err := x.ks.fields(src, func(f, v []byte) error {
			return x.ks.txn.Set(fieldKey(dp, f), append([]byte(nil), v...))
		})
		if err != nil {
			return err
		}
	}
	nm := meta{typ: m.typ, expireAt: m.expireAt, payload: m.payload}
	if err := x.ks.put(dst, nm, meta{}, false); err != nil {
		return err
	}
	if err := x.ks.remove(src, m); err != nil {
		return err
	}
	if nx {
		x.w.WriteInt(1)
	} else {
		x.w.WriteSimple("OK")
	}
	return nil
}

func cmdExpire(x *call) error {
	n, ok := parseInt(x.args[2])
	if !ok {
		return errNotInteger
	}
	var nx, xx, gt, lt bool
	for _, a := range x.args[3:] {
		switch {
		case equalFold(a, "nx"):
			nx = true
		case equalFold(a, "xx"):
			xx = true
		case equalFold(a, "gt"):
			gt = true
		case equalFold(a, "lt"):
			lt = true
		default:
			return replyError("ERR Unsupported option " + string(a))
		}
	}
	if nx && (xx || gt || lt) {
		return replyError("ERR NX and XX, GT or LT options at the same time are not compatible")
	}
	if gt && lt {
		return replyError("ERR GT and LT options at the same time are not compatible")
	}
	unit := int64(1000)
	if x.cmd.name == "pexpire" || x.cmd.name == "pexpireat" {
		unit = 1
	}
	abs := x.cmd.name == "expireat" || x.cmd.name == "pexpireat"
	if n > math.MaxInt64/unit || n < math.MinInt64/unit {
		return errInvalidExpire(x.cmd.name)
	}
	at := n * unit
	if !abs {
		var ok bool
		if at, ok = addInt(x.ks.now, at); !ok {
			return errInvalidExpire(x.cmd.name)
		}
	}
	k := x.args[1]
	m, ok, err := x.ks.lookup(k)
	if err != nil {
		return err
	}
	if !ok {
		x.w.WriteInt(0)
		return nil
	}
	cur := m.expireAt // 0: no TTL, i.e. infinite
	switch {
	case nx && cur != 0, xx && cur == 0,
		gt && (cur == 0 || at <= cur),
		lt && cur != 0 && at >= cur:
		x.w.WriteInt(0)
		return nil
	}
	if at <= x.ks.now {
		err = x.ks.remove(k, m)
	} else {
		nm := m
		nm.expireAt = at
		err = x.ks.put(k, nm, m, true)
	}
	if err != nil {
		return err
	}
	x.w.WriteInt(1)
	return nil
}

func cmdTTL(x *call) error {
	m, ok, err := x.ks.lookup(x.args[1])
	if err != nil {
		return err
	}
	switch {
	case !ok:
		x.w.WriteInt(-2)
	case m.expireAt == 0:
		x.w.WriteInt(-1)
	default:
		switch x.cmd.name {
		case "ttl":
			x.w.WriteInt((m.expireAt - x.ks.now + 500) / 1000)
		case "pttl":
			x.w.WriteInt(m.expireAt - x.ks.now)
		case "expiretime":
			x.w.WriteInt(m.expireAt / 1000)
		default:
			x.w.WriteInt(m.expireAt)
		}
	}
	return nil
}

func cmdPersist(x *call) error {
	k := x.args[1]
	m, ok, err := x.ks.lookup(k)
	if err != nil {
		return err
	}
	if !ok || m.expireAt == 0 {
		x.w.WriteInt(0)
		return nil
	}
	nm := m
	nm.expireAt = 0
	if err := x.ks.put(k, nm, m, true); err != nil {
		return err
	}
	x.w.WriteInt(1)
	return nil
}

// scanOptions are SCAN/HSCAN's MATCH, COUNT, TYPE and NOVALUES.
type scanOptions struct {
	match    []byte
	count    int
	typ      []byte
	noValues bool
}

func parseScanOptions(x *call, from int) (scanOptions, error) {
	o := scanOptions{count: 10}
	for i := from; i < len(x.args); i++ {
		a := x.args[i]
		switch {
		case equalFold(a, "novalues") && x.cmd.name == "hscan":
			o.noValues = true
			continue
		case i+1 >= len(x.args):
			return o, errSyntax
		case equalFold(a, "match"):
			o.match = x.args[i+1]
		case equalFold(a, "count"):
			n, ok := parseInt(x.args[i+1])
			if !ok {
				return o, errNotInteger
			}
			if n < 1 {
				return o, errSyntax
			}
			o.count = int(min(n, 100000))
		case equalFold(a, "type") && x.cmd.name == "scan":
			o.typ = x.args[i+1]
		default:
			return o, errSyntax
		}
		i++
	}
	return o, nil
}

// literalPrefix is the part of a glob pattern before its first wildcard:
// every match starts with it, so a scan can start there.
func literalPrefix(p []byte) []byte {
	for i, c := range p {
		switch c {
		case '*', '?', '[', '\\':
			return p[:i]
		}
	}
	return p
}

func (o scanOptions) matches(k []byte) bool { return o.match == nil || globMatch(o.match, k) }

func cmdScan(x *call) error {
	resume, ok := x.sess.srv.cursors.get(x.args[1])
	if !ok {
		return errInvalidCursor
	}
	o, err := parseScanOptions(x, 2)
	if err != nil {
		return err
	}
	start, end := metaSpan()
	if o.match != nil {
		if p := literalPrefix(o.match); len(p) > 0 {
			start = MetaKey(p)
			end = prefixEnd(start)
		}
	}
	if resume != nil && bytes.Compare(resume, start) > 0 {
		start = resume
	}
	kvs, err := x.ks.txn.Scan(x.ks.ctx, start, end, o.count, false)
	if err != nil {
		return err
	}
	var out [][]byte
	for _, e := range kvs {
		m, err := decodeMeta(e.Value)
		if err != nil {
			return err
		}
		k := userKey(e.Key)
		if m.expired(x.ks.now) || !o.matches(k) {
			continue
		}
		if o.typ != nil && !equalFold(o.typ, m.typ.String()) {
			continue
		}
		out = append(out, k)
	}
	var next uint64
	if len(kvs) == o.count {
		next = x.sess.srv.cursors.put(append(append([]byte(nil), kvs[len(kvs)-1].Key...), 0))
	}
	x.w.WriteArrayLen(2)
	x.w.WriteBulk(strconv.AppendUint(nil, next, 10))
	x.w.WriteArrayLen(len(out))
	for _, k := range out {
		x.w.WriteBulk(k)
	}
	return nil
}

// eachKey calls fn for every live key whose name starts with prefix.
func (ks *keyspace) eachKey(prefix []byte, fn func(k []byte, m meta) error) error {
	start, end := metaSpan()
	if len(prefix) > 0 {
		start = MetaKey(prefix)
		end = prefixEnd(start)
	}
	it, err := ks.txn.Iter(ks.ctx, start, end, false)
	if err != nil {
		return err
	}
	defer it.Close()
	for it.Valid() {
		m, err := decodeMeta(it.Value())
		if err != nil {
			return err
		}
		if !m.expired(ks.now) {
			if err := fn(userKey(it.Key()), m); err != nil {
				return err
			}
		}
		if err := it.Next(ks.ctx); err != nil {
			return err
		}
	}
	return nil
}

func cmdKeys(x *call) error {
	pat := x.args[1]
	var out [][]byte
	err := x.ks.eachKey(literalPrefix(pat), func(k []byte, _ meta) error {
		if globMatch(pat, k) {
			out = append(out, append([]byte(nil), k...))
		}
		return nil
	})
	if err != nil {
		return err
	}
	x.w.WriteArrayLen(len(out))
	for _, k := range out {
		x.w.WriteBulk(k)
	}
	return nil
}

func cmdDBSize(x *call) error {
	var n int64
	err := x.ks.eachKey(nil, func([]byte, meta) error { n++; return nil })
	if err != nil {
		return err
	}
	x.w.WriteInt(n)
	return nil
}

// flushBatch is how many records one FLUSHDB transaction deletes.
const flushBatch = 4096

// cmdFlush deletes the whole Redis keyspace in transactions of flushBatch
// records. Each batch is atomic; the flush as a whole is not (a client
// writing during FLUSHALL may see part of the keyspace gone), unlike
// Redis where FLUSHALL blocks the server.
func cmdFlush(x *call) error {
	for _, a := range x.args[1:] {
		if !equalFold(a, "async") && !equalFold(a, "sync") {
			return errSyntax
		}
	}
	if len(x.args) > 2 {
		return errSyntax
	}
	ctx, cancel := context.WithTimeout(x.sess.srv.ctx, 10*x.sess.srv.cfg.CommandTimeout)
	defer cancel()
	for {
		var n int
		err := x.sess.srv.update(ctx, func(ks *keyspace) error {
			kvs, err := ks.txn.Scan(ks.ctx, []byte{keyspacePrefix}, []byte{keyspacePrefix + 1}, flushBatch, false)
			if err != nil {
				return err
			}
			n = len(kvs)
			for _, e := range kvs {
				if err := ks.txn.Delete(e.Key); err != nil {
					return err
				}
			}
			ks.wrote = n > 0
			return nil
		})
		if err != nil {
			return err
		}
		if n < flushBatch {
			break
		}
	}
	x.w.WriteSimple("OK")
	return nil
}
