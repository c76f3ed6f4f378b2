package resp

import (
	"math"
	"strconv"
)

func init() {
	str := []string{"@string"}
	register(
		&command{name: "get", arity: 2, flags: flagData | flagReadonly | flagFast | flagLatest, firstKey: 1, lastKey: 1, step: 1, acl: str, run: cmdGet},
		&command{name: "set", arity: -3, flags: flagData | flagWrite | flagDenyOOM, firstKey: 1, lastKey: 1, step: 1, acl: str, run: cmdSet},
		&command{name: "setnx", arity: 3, flags: flagData | flagWrite | flagDenyOOM | flagFast, firstKey: 1, lastKey: 1, step: 1, acl: str, run: cmdSetNX},
		&command{name: "setex", arity: 4, flags: flagData | flagWrite | flagDenyOOM, firstKey: 1, lastKey: 1, step: 1, acl: str, run: cmdSetEX},
		&command{name: "psetex", arity: 4, flags: flagData | flagWrite | flagDenyOOM, firstKey: 1, lastKey: 1, step: 1, acl: str, run: cmdSetEX},
		&command{name: "getset", arity: 3, flags: flagData | flagWrite | flagDenyOOM | flagFast, firstKey: 1, lastKey: 1, step: 1, acl: str, run: cmdGetSet},
		&command{name: "getdel", arity: 2, flags: flagData | flagWrite | flagFast, firstKey: 1, lastKey: 1, step: 1, acl: str, run: cmdGetDel},
		&command{name: "getex", arity: -2, flags: flagData | flagWrite | flagFast, firstKey: 1, lastKey: 1, step: 1, acl: str, run: cmdGetEx},
		&command{name: "mget", arity: -2, flags: flagData | flagReadonly | flagFast, firstKey: 1, lastKey: -1, step: 1, acl: str, run: cmdMGet},
		&command{name: "mset", arity: -3, flags: flagData | flagWrite | flagDenyOOM, firstKey: 1, lastKey: -1, step: 2, acl: str, run: cmdMSet},
		&command{name: "msetnx", arity: -3, flags: flagData | flagWrite | flagDenyOOM, firstKey: 1, lastKey: -1, step: 2, acl: str, run: cmdMSet},
		&command{name: "incr", arity: 2, flags: flagData | flagWrite | flagDenyOOM | flagFast, firstKey: 1, lastKey: 1, step: 1, acl: str, run: cmdIncr},
		&command{name: "decr", arity: 2, flags: flagData | flagWrite | flagDenyOOM | flagFast, firstKey: 1, lastKey: 1, step: 1, acl: str, run: cmdIncr},
		&command{name: "incrby", arity: 3, flags: flagData | flagWrite | flagDenyOOM | flagFast, firstKey: 1, lastKey: 1, step: 1, acl: str, run: cmdIncr},
		&command{name: "decrby", arity: 3, flags: flagData | flagWrite | flagDenyOOM | flagFast, firstKey: 1, lastKey: 1, step: 1, acl: str, run: cmdIncr},
		&command{name: "incrbyfloat", arity: 3, flags: flagData | flagWrite | flagDenyOOM | flagFast, firstKey: 1, lastKey: 1, step: 1, acl: str, run: cmdIncrByFloat},
		&command{name: "append", arity: 3, flags: flagData | flagWrite | flagDenyOOM | flagFast, firstKey: 1, lastKey: 1, step: 1, acl: str, run: cmdAppend},
		&command{name: "strlen", arity: 2, flags: flagData | flagReadonly | flagFast, firstKey: 1, lastKey: 1, step: 1, acl: str, run: cmdStrlen},
		&command{name: "getrange", arity: 4, flags: flagData | flagReadonly, firstKey: 1, lastKey: 1, step: 1, acl: str, run: cmdGetRange},
		&command{name: "substr", arity: 4, flags: flagData | flagReadonly, firstKey: 1, lastKey: 1, step: 1, acl: str, run: cmdGetRange},
		&command{name: "setrange", arity: 4, flags: flagData | flagWrite | flagDenyOOM, firstKey: 1, lastKey: 1, step: 1, acl: str, run: cmdSetRange},
	)
}

// getString returns the string at k, or found=false when k does not exist.
func (x *call) getString(k []byte) (meta, bool, error) {
	return x.ks.lookupType(k, typeString)
}

func cmdGet(x *call) error {
	m, ok, err := x.ks.lookup(x.args[1])
	if err != nil {
		return err
	}
	writeGet(x.w, m, ok)
	return nil
}

// writeGet replies to GET for a key whose metadata is m (live says whether
// the key exists): its string, nil, or WRONGTYPE.
func writeGet(w *Writer, m meta, live bool) {
	m, live, err := ofType(m, live, typeString)
	switch {
	case err != nil:
		writeError(w, err)
	case !live:
		w.WriteNull()
	default:
		w.WriteBulk(m.payload)
	}
}

// expiryOption is a parsed EX/PX/EXAT/PXAT/KEEPTTL/PERSIST option.
type expiryOption struct {
	set     bool  // an expiry option was given
	at      int64 // absolute unix ms; 0 with keep or persist
	keep    bool  // KEEPTTL
	persist bool  // PERSIST (GETEX)
}

// parseExpiry parses the option at args[i] (EX etc.) and its value at
// args[i+1]. It reports how many arguments it used (0: not an expiry
// option).
func parseExpiry(x *call, i int, opt *expiryOption) (int, error) {
	a := x.args[i]
	unit := int64(0)
	abs := false
	switch {
	case equalFold(a, "ex"):
		unit = 1000
	case equalFold(a, "px"):
		unit = 1
	case equalFold(a, "exat"):
		unit, abs = 1000, true
	case equalFold(a, "pxat"):
		unit, abs = 1, true
	case equalFold(a, "keepttl"):
		if opt.set || x.cmd.name != "set" {
			return 0, errSyntax
		}
		opt.set, opt.keep = true, true
		return 1, nil
	case equalFold(a, "persist"):
		if opt.set || x.cmd.name != "getex" {
			return 0, errSyntax
		}
		opt.set, opt.persist = true, true
		return 1, nil
	default:
		return 0, nil
	}
	if opt.set || i+1 >= len(x.args) {
		return 0, errSyntax
	}
	n, ok := parseInt(x.args[i+1])
	if !ok {
		return 0, errNotInteger
	}
	at, err := expireAt(x, n, unit, abs)
	if err != nil {
		return 0, err
	}
	opt.set, opt.at = true, at
	return 2, nil
}

// expireAt converts a TTL option value to an absolute unix ms time. A
// non-positive value or one that overflows is "invalid expire time".
func expireAt(x *call, n, unit int64, abs bool) (int64, error) {
	if n <= 0 || n > math.MaxInt64/unit {
		return 0, errInvalidExpire(x.cmd.name)
	}
	ms := n * unit
	if abs {
		return ms, nil
	}
	at, ok := addInt(x.ks.now, ms)
	if !ok {
		return 0, errInvalidExpire(x.cmd.name)
	}
	return at, nil
}

func cmdSet(x *call) error {
	var (
		nx, xx, get bool
		exp         expiryOption
	)
	for i := 3; i < len(x.args); {
		a := x.args[i]
		switch {
		case equalFold(a, "nx") && !xx:
			nx = true
		case equalFold(a, "xx") && !nx:
			xx = true
		case equalFold(a, "get"):
			get = true
		default:
			n, err := parseExpiry(x, i, &exp)
			if err != nil {
				return err
			}
			if n == 0 {
				return errSyntax
			}
			i += n
			continue
		}
		i++
	}
	k, v := x.args[1], x.args[2]
	old, found, err := x.ks.lookupAny(k) // SET replaces a value of any type
	if err != nil {
		return err
	}
	live := found && !old.expired(x.ks.now)
	if get && live && old.typ != typeString {
		return errWrongType
	}
	if (nx && live) || (xx && !live) {
		if get {
			writeOld(x, old, live)
		} else {
			x.w.WriteNull()
		}
		return nil
	}
	m := meta{typ: typeString, expireAt: exp.at, payload: v}
	if exp.keep && live {
		m.expireAt = old.expireAt
	}
	if err := x.ks.put(k, m, old, found); err != nil {
		return err
	}
	if get {
		writeOld(x, old, live)
	} else {
		x.w.WriteSimple("OK")
	}
	return nil
}

func writeOld(x *call, old meta, live bool) {
	if live {
		x.w.WriteBulk(old.payload)
	} else {
		x.w.WriteNull()
	}
}

func cmdSetNX(x *call) error {
	k := x.args[1]
	old, found, err := x.ks.lookupAny(k)
	if err != nil {
		return err
	}
	if found && !old.expired(x.ks.now) {
		x.w.WriteInt(0)
		return nil
	}
	if err := x.ks.put(k, meta{typ: typeString, payload: x.args[2]}, old, found); err != nil {
		return err
	}
	x.w.WriteInt(1)
	return nil
}

func cmdSetEX(x *call) error {
	n, ok := parseInt(x.args[2])
	if !ok {
		return errNotInteger
	}
	unit := int64(1000)
	if x.cmd.name == "psetex" {
		unit = 1
	}
	at, err := expireAt(x, n, unit, false)
	if err != nil {
		return err
	}
	if err := x.ks.setString(x.args[1], x.args[3], at); err != nil {
		return err
	}
	x.w.WriteSimple("OK")
	return nil
}

func cmdGetSet(x *call) error {
	k := x.args[1]
	old, found, live, err := x.ks.lookupForWrite(k, typeString)
	if err != nil {
		return err
	}
	if err := x.ks.put(k, meta{typ: typeString, payload: x.args[2]}, old, found); err != nil {
		return err
	}
	writeOld(x, old, live)
	return nil
}

func cmdGetDel(x *call) error {
	m, ok, err := x.getString(x.args[1])
	if err != nil {
		return err
	}
	if !ok {
		x.w.WriteNull()
		return nil
	}
	if err := x.ks.remove(x.args[1], m); err != nil {
		return err
	}
	x.w.WriteBulk(m.payload)
	return nil
}

func cmdGetEx(x *call) error {
	var exp expiryOption
	for i := 2; i < len(x.args); {
		n, err := parseExpiry(x, i, &exp)
		if err != nil {
			return err
		}
		if n == 0 {
			return errSyntax
		}
		i += n
	}
	k := x.args[1]
	m, ok, err := x.getString(k)
	if err != nil {
		return err
	}
	if !ok {
		x.w.WriteNull()
		return nil
	}
	if exp.set {
		nm := m
		nm.expireAt = exp.at // 0 for PERSIST
		if exp.at != 0 && exp.at <= x.ks.now {
			err = x.ks.remove(k, m)
		} else if nm.expireAt != m.expireAt {
			err = x.ks.put(k, nm, m, true)
		}
		if err != nil {
			return err
		}
	}
	x.w.WriteBulk(m.payload)
	return nil
}

func cmdMGet(x *call) error {
	keys := x.args[1:]
	mk := make([][]byte, len(keys))
	for i, k := range keys {
		mk[i] = MetaKey(k)
	}
	vals, err := x.ks.txn.BatchGet(x.ks.ctx, mk)
	if err != nil {
		return err
	}
	x.w.WriteArrayLen(len(keys))
	for i := range keys {
		b, ok := vals[string(mk[i])]
		if !ok {
			x.w.WriteNull()
			continue
		}
		m, err := decodeMeta(b)
		if err != nil {
			return err
		}
		if m.typ != typeString || m.expired(x.ks.now) {
			x.w.WriteNull()
			continue
		}
		x.w.WriteBulk(m.payload)
	}
	return nil
}

func cmdMSet(x *call) error {
	if len(x.args)%2 != 1 {
		return errArity(x.cmd.name)
	}
	nx := x.cmd.name == "msetnx"
	// Later pairs win for a key given twice, as in Redis.
	type pair struct {
		old   meta
		found bool
	}
	olds := make(map[string]pair, len(x.args)/2)
	for i := 1; i < len(x.args); i += 2 {
		k := x.args[i]
		if _, seen := olds[string(k)]; seen {
			continue
		}
		old, found, err := x.ks.lookupAny(k)
		if err != nil {
			return err
		}
		if nx && found && !old.expired(x.ks.now) {
			x.w.WriteInt(0)
			return nil
		}
		olds[string(k)] = pair{old, found}
	}
	for i := 1; i < len(x.args); i += 2 {
		k := x.args[i]
		p := olds[string(k)]
		if err := x.ks.put(k, meta{typ: typeString, payload: x.args[i+1]}, p.old, p.found); err != nil {
			return err
		}
		// A later pair for the same key replaces what this one wrote: a
		// string without TTL.
		olds[string(k)] = pair{meta{typ: typeString}, true}
	}
	if nx {
		x.w.WriteInt(1)
	} else {
		x.w.WriteSimple("OK")
	}
	return nil
}

func cmdIncr(x *call) error {
	var by int64 = 1
	switch x.cmd.name {
	case "decr":
		by = -1
	case "incrby", "decrby":
		n, ok := parseInt(x.args[2])
		if !ok {
			return errNotInteger
		}
		by = n
		if x.cmd.name == "decrby" {
			if n == math.MinInt64 {
				return replyError("ERR decrement would overflow")
			}
			by = -n
		}
	}
	k := x.args[1]
	old, found, live, err := x.ks.lookupForWrite(k, typeString)
	if err != nil {
		return err
	}
	var cur int64
	m := meta{typ: typeString}
	if live {
		v, ok := parseInt(old.payload)
		if !ok {
			return errNotInteger
		}
		cur = v
		m.expireAt = old.expireAt
	}
	n, ok := addInt(cur, by)
	if !ok {
		return errOverflow
	}
	m.payload = strconv.AppendInt(nil, n, 10)
	if err := x.ks.put(k, m, old, found); err != nil {
		return err
	}
	x.w.WriteInt(n)
	return nil
}

func cmdIncrByFloat(x *call) error {
	if _, ok := parseFloat(x.args[2]); !ok {
		return errNotFloat
	}
	k := x.args[1]
	old, found, live, err := x.ks.lookupForWrite(k, typeString)
	if err != nil {
		return err
	}
	cur := []byte("0")
	m := meta{typ: typeString}
	if live {
		if _, ok := parseFloat(old.payload); !ok {
			return errNotFloat
		}
		cur = old.payload
		m.expireAt = old.expireAt
	}
	sum, ok := incrFloat(cur, x.args[2])
	if !ok {
		return errNaN
	}
	m.payload = sum
	if err := x.ks.put(k, m, old, found); err != nil {
		return err
	}
	x.w.WriteBulk(m.payload)
	return nil
}

func cmdAppend(x *call) error {
	k := x.args[1]
	old, found, live, err := x.ks.lookupForWrite(k, typeString)
	if err != nil {
		return err
	}
	m := meta{typ: typeString}
	if live {
		m.expireAt = old.expireAt
		if len(old.payload)+len(x.args[2]) > x.ks.maxValue {
			return errValueTooLarge
		}
		m.payload = append(append(make([]byte, 0, len(old.payload)+len(x.args[2])), old.payload...), x.args[2]...)
	} else {
		m.payload = x.args[2]
	}
	if err := x.ks.put(k, m, old, found); err != nil {
		return err
	}
	x.w.WriteInt(int64(len(m.payload)))
	return nil
}

func cmdStrlen(x *call) error {
	m, ok, err := x.getString(x.args[1])
	if err != nil {
		return err
	}
	if !ok {
		x.w.WriteInt(0)
		return nil
	}
	x.w.WriteInt(int64(len(m.payload)))
	return nil
}

func cmdGetRange(x *call) error {
	start, ok1 := parseInt(x.args[2])
	end, ok2 := parseInt(x.args[3])
	if !ok1 || !ok2 {
		return errNotInteger
	}
	m, ok, err := x.getString(x.args[1])
	if err != nil {
		return err
	}
	if !ok {
		x.w.WriteBulk(nil)
		return nil
	}
	s := m.payload
	n := int64(len(s))
	if start < 0 && end < 0 && start > end {
		x.w.WriteBulk(nil)
		return nil
	}
	if start < 0 {
		start += n
	}
	if end < 0 {
		end += n
	}
	if start < 0 {
		start = 0
	}
	if end < 0 {
		end = 0
	}
	if end >= n {
		end = n - 1
	}
	if n == 0 || start > end {
		x.w.WriteBulk(nil)
		return nil
	}
	x.w.WriteBulk(s[start : end+1])
	return nil
}

func cmdSetRange(x *call) error {
	off, ok := parseInt(x.args[2])
	if !ok {
		return errNotInteger
	}
	if off < 0 {
		return errOffsetRange
	}
	val := x.args[3]
	k := x.args[1]
	old, found, live, err := x.ks.lookupForWrite(k, typeString)
	if err != nil {
		return err
	}
	var cur []byte
	if live {
		cur = old.payload
	}
	if len(val) == 0 {
		x.w.WriteInt(int64(len(cur)))
		return nil
	}
	if off+int64(len(val)) > int64(x.ks.maxValue) {
		return errValueTooLarge
	}
	size := max(int(off)+len(val), len(cur))
	buf := make([]byte, size)
	copy(buf, cur)
	copy(buf[off:], val)
	m := meta{typ: typeString, payload: buf}
	if live {
		m.expireAt = old.expireAt
	}
	if err := x.ks.put(k, m, old, found); err != nil {
		return err
	}
	x.w.WriteInt(int64(size))
	return nil
}
