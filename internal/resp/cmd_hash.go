package resp

import (
	"math"
	"strconv"
)

func init() {
	h := []string{"@hash"}
	register(
		&command{name: "hset", arity: -4, flags: flagData | flagWrite | flagDenyOOM | flagFast, firstKey: 1, lastKey: 1, step: 1, acl: h, run: cmdHSet},
		&command{name: "hmset", arity: -4, flags: flagData | flagWrite | flagDenyOOM | flagFast, firstKey: 1, lastKey: 1, step: 1, acl: h, run: cmdHSet},
		&command{name: "hsetnx", arity: 4, flags: flagData | flagWrite | flagDenyOOM | flagFast, firstKey: 1, lastKey: 1, step: 1, acl: h, run: cmdHSetNX},
		&command{name: "hget", arity: 3, flags: flagData | flagReadonly | flagFast, firstKey: 1, lastKey: 1, step: 1, acl: h, run: cmdHGet},
		&command{name: "hmget", arity: -3, flags: flagData | flagReadonly | flagFast, firstKey: 1, lastKey: 1, step: 1, acl: h, run: cmdHMGet},
		&command{name: "hgetall", arity: 2, flags: flagData | flagReadonly, firstKey: 1, lastKey: 1, step: 1, acl: h, run: cmdHGetAll},
		&command{name: "hkeys", arity: 2, flags: flagData | flagReadonly, firstKey: 1, lastKey: 1, step: 1, acl: h, run: cmdHGetAll},
		&command{name: "hvals", arity: 2, flags: flagData | flagReadonly, firstKey: 1, lastKey: 1, step: 1, acl: h, run: cmdHGetAll},
		&command{name: "hdel", arity: -3, flags: flagData | flagWrite | flagFast, firstKey: 1, lastKey: 1, step: 1, acl: h, run: cmdHDel},
		&command{name: "hlen", arity: 2, flags: flagData | flagReadonly | flagFast, firstKey: 1, lastKey: 1, step: 1, acl: h, run: cmdHLen},
		&command{name: "hexists", arity: 3, flags: flagData | flagReadonly | flagFast, firstKey: 1, lastKey: 1, step: 1, acl: h, run: cmdHExists},
		&command{name: "hstrlen", arity: 3, flags: flagData | flagReadonly | flagFast, firstKey: 1, lastKey: 1, step: 1, acl: h, run: cmdHExists},
		&command{name: "hincrby", arity: 4, flags: flagData | flagWrite | flagDenyOOM | flagFast, firstKey: 1, lastKey: 1, step: 1, acl: h, run: cmdHIncrBy},
		&command{name: "hincrbyfloat", arity: 4, flags: flagData | flagWrite | flagDenyOOM | flagFast, firstKey: 1, lastKey: 1, step: 1, acl: h, run: cmdHIncrByFloat},
		&command{name: "hscan", arity: -3, flags: flagData | flagReadonly, firstKey: 1, lastKey: 1, step: 1, acl: h, run: cmdHScan},
	)
}

func cmdHSet(x *call) error {
	if len(x.args)%2 != 0 {
		return errArity(x.cmd.name)
	}
	h, err := x.ks.openHash(x.args[1])
	if err != nil {
		return err
	}
	var added int64
	for i := 2; i < len(x.args); i += 2 {
		isNew, err := h.set(x.args[i], x.args[i+1])
		if err != nil {
			return err
		}
		if isNew {
			added++
		}
	}
	if err := h.close(); err != nil {
		return err
	}
	if x.cmd.name == "hmset" {
		x.w.WriteSimple("OK")
	} else {
		x.w.WriteInt(added)
	}
	return nil
}

func cmdHSetNX(x *call) error {
	h, err := x.ks.openHash(x.args[1])
	if err != nil {
		return err
	}
	_, exists, err := h.get(x.args[2])
	if err != nil {
		return err
	}
	if exists {
		x.w.WriteInt(0)
		return nil
	}
	if _, err := h.set(x.args[2], x.args[3]); err != nil {
		return err
	}
	if err := h.close(); err != nil {
		return err
	}
	x.w.WriteInt(1)
	return nil
}

func cmdHGet(x *call) error {
	_, ok, err := x.ks.lookupType(x.args[1], typeHash)
	if err != nil {
		return err
	}
	if !ok {
		x.w.WriteNull()
		return nil
	}
	v, ok, err := x.ks.getField(x.args[1], x.args[2])
	if err != nil {
		return err
	}
	if !ok {
		x.w.WriteNull()
		return nil
	}
	x.w.WriteBulk(v)
	return nil
}

func cmdHMGet(x *call) error {
	k := x.args[1]
	_, ok, err := x.ks.lookupType(k, typeHash)
	if err != nil {
		return err
	}
	fields := x.args[2:]
	var vals map[string][]byte
	p := fieldPrefix(k)
	fks := make([][]byte, len(fields))
	for i, f := range fields {
		fks[i] = fieldKey(p, f)
	}
	if ok {
		if vals, err = x.ks.txn.BatchGet(x.ks.ctx, fks); err != nil {
			return err
		}
	}
	x.w.WriteArrayLen(len(fields))
	for i := range fields {
		if v, ok := vals[string(fks[i])]; ok {
			x.w.WriteBulk(v)
		} else {
			x.w.WriteNull()
		}
	}
	return nil
}

// cmdHGetAll serves HGETALL, HKEYS and HVALS.
func cmdHGetAll(x *call) error {
	k := x.args[1]
	m, ok, err := x.ks.lookupType(k, typeHash)
	if err != nil {
		return err
	}
	if !ok {
		if x.cmd.name == "hgetall" {
			x.w.WriteMapLen(0)
		} else {
			x.w.WriteArrayLen(0)
		}
		return nil
	}
	type fv struct{ f, v []byte }
	out := make([]fv, 0, m.hashLen())
	err = x.ks.fields(k, func(f, v []byte) error {
		out = append(out, fv{append([]byte(nil), f...), append([]byte(nil), v...)})
		return nil
	})
	if err != nil {
		return err
	}
	switch x.cmd.name {
	case "hgetall":
		x.w.WriteMapLen(len(out))
		for _, e := range out {
			x.w.WriteBulk(e.f)
			x.w.WriteBulk(e.v)
		}
	case "hkeys":
		x.w.WriteArrayLen(len(out))
		for _, e := range out {
			x.w.WriteBulk(e.f)
		}
	default:
		x.w.WriteArrayLen(len(out))
		for _, e := range out {
			x.w.WriteBulk(e.v)
		}
	}
	return nil
}

func cmdHDel(x *call) error {
	k := x.args[1]
	_, ok, err := x.ks.lookupType(k, typeHash)
	if err != nil {
		return err
	}
	if !ok {
		x.w.WriteInt(0)
		return nil
	}
	h, err := x.ks.openHash(k)
	if err != nil {
		return err
	}
	var n int64
	for _, f := range x.args[2:] {
		ok, err := h.del(f)
		if err != nil {
			return err
		}
		if ok {
			n++
		}
	}
	if n > 0 {
		if err := h.close(); err != nil {
			return err
		}
	}
	x.w.WriteInt(n)
	return nil
}

func cmdHLen(x *call) error {
	m, ok, err := x.ks.lookupType(x.args[1], typeHash)
	if err != nil {
		return err
	}
	if !ok {
		x.w.WriteInt(0)
		return nil
	}
	x.w.WriteInt(m.hashLen())
	return nil
}

// cmdHExists serves HEXISTS and HSTRLEN.
func cmdHExists(x *call) error {
	_, ok, err := x.ks.lookupType(x.args[1], typeHash)
	if err != nil {
		return err
	}
	var v []byte
	if ok {
		if v, ok, err = x.ks.getField(x.args[1], x.args[2]); err != nil {
			return err
		}
	}
	switch {
	case x.cmd.name == "hstrlen":
		x.w.WriteInt(int64(len(v)))
	case ok:
		x.w.WriteInt(1)
	default:
		x.w.WriteInt(0)
	}
	return nil
}

func cmdHIncrBy(x *call) error {
	by, ok := parseInt(x.args[3])
	if !ok {
		return errNotInteger
	}
	h, err := x.ks.openHash(x.args[1])
	if err != nil {
		return err
	}
	v, exists, err := h.get(x.args[2])
	if err != nil {
		return err
	}
	var cur int64
	if exists {
		if cur, ok = parseInt(v); !ok {
			return errHashNotInt
		}
	}
	n, ok := addInt(cur, by)
	if !ok {
		return errOverflow
	}
	if _, err := h.set(x.args[2], strconv.AppendInt(nil, n, 10)); err != nil {
		return err
	}
	if err := h.close(); err != nil {
		return err
	}
	x.w.WriteInt(n)
	return nil
}

func cmdHIncrByFloat(x *call) error {
	by, ok := parseFloat(x.args[3])
	if !ok {
		return errNotFloat
	}
	if math.IsInf(by, 0) {
		return replyError("ERR value is NaN or Infinity")
	}
	h, err := x.ks.openHash(x.args[1])
	if err != nil {
		return err
	}
	v, exists, err := h.get(x.args[2])
	if err != nil {
		return err
	}
	cur := []byte("0")
	if exists {
		if _, ok = parseFloat(v); !ok {
			return errHashNotFloat
		}
		cur = v
	}
	out, ok := incrFloat(cur, x.args[3])
	if !ok {
		return errNaN
	}
	if _, err := h.set(x.args[2], out); err != nil {
		return err
	}
	if err := h.close(); err != nil {
		return err
	}
	x.w.WriteBulk(out)
	return nil
}

func cmdHScan(x *call) error {
	k := x.args[1]
	resume, ok := x.sess.srv.cursors.get(x.args[2])
	if !ok {
		return errInvalidCursor
	}
	o, err := parseScanOptions(x, 3)
	if err != nil {
		return err
	}
	_, live, err := x.ks.lookupType(k, typeHash)
	if err != nil {
		return err
	}
	p := fieldPrefix(k)
	start, end := p, prefixEnd(p)
	if resume != nil && len(resume) >= len(p) && string(resume[:len(p)]) == string(p) {
		start = resume
	}
	var kvs []kvPair
	var next uint64
	if live {
		res, err := x.ks.txn.Scan(x.ks.ctx, start, end, o.count, false)
		if err != nil {
			return err
		}
		for _, e := range res {
			f := e.Key[len(p):]
			if o.matches(f) {
				kvs = append(kvs, kvPair{f, e.Value})
			}
		}
		if len(res) == o.count {
			next = x.sess.srv.cursors.put(append(append([]byte(nil), res[len(res)-1].Key...), 0))
		}
	}
	x.w.WriteArrayLen(2)
	x.w.WriteBulk(strconv.AppendUint(nil, next, 10))
	if o.noValues {
		x.w.WriteArrayLen(len(kvs))
	} else {
		x.w.WriteArrayLen(2 * len(kvs))
	}
	for _, e := range kvs {
		x.w.WriteBulk(e.k)
		if !o.noValues {
			x.w.WriteBulk(e.v)
		}
	}
	return nil
}

type kvPair struct{ k, v []byte }
