// Package gen holds the random generators of the workloads: the key choosers
// of YCSB's core workload (uniform, zipfian, scrambled zipfian, skewed
// latest), the counter that hands out insert keys and tells readers which
// ones are safe to read, a weighted chooser of operations, YCSB's key hash
// and random field values.
//
// The generators follow the YCSB paper (Cooper et al., "Benchmarking Cloud
// Serving Systems with YCSB", SoCC 2010) and the zipfian method it cites
// (Gray et al., "Quickly Generating Billion-Record Synthetic Databases",
// SIGMOD 1994); they were written from those definitions for Strata.
//
// Contract: generators that take a *rand.Rand keep no other mutable state
// (Zipfian's parameters are immutable once built, except through Grow on a
// caller's own copy), so each worker gives its own *rand.Rand and copies and
// no locks are taken on the hot path. Counter is the one shared, concurrent
// piece.
package gen

import (
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
)

// ZipfianTheta is the skew YCSB uses for its zipfian request distribution
// (the "zipfian constant"): item i (0-based) is drawn with probability
// proportional to 1/(i+1)^0.99.
const ZipfianTheta = 0.99

// FNV64 is YCSB's key hash: 64-bit FNV-1a over the eight little-endian bytes
// of v, with the sign bit folded away as Java's Math.abs does, so that the
// result prints as a non-negative decimal. It is used to turn record numbers
// into keys ("insertorder=hashed") and to scatter popular items over the key
// space.
func FNV64(v uint64) uint64 {
	const (
		offset = 0xcbf29ce484222325
		prime  = 1099511628211
	)
	h := uint64(offset)
	for i := 0; i < 8; i++ {
		h ^= v & 0xff
		h *= prime
		v >>= 8
	}
	if int64(h) < 0 {
		h = uint64(-int64(h))
	}
	return h
}

// Key is the key of record number n: prefix followed by the decimal form of
// FNV64(n), as YCSB builds "user6284781860667377211". Hashing spreads records
// inserted in order over the whole key space.
func Key(prefix string, n uint64) string {
	var buf [32]byte
	b := append(buf[:0], prefix...)
	b = strconv.AppendUint(b, FNV64(n), 10)
	return string(b)
}

// exactZetaTerms is how many terms of a zeta sum are added one by one; the
// rest is the Euler-Maclaurin approximation of the tail, whose error is far
// below float64 rounding at that distance
// (the first omitted term is of order x^-(theta+5) at x = 65536).
const exactZetaTerms = 1 << 16

// Zeta returns sum_{i=1..n} 1/i^theta, the normalising constant of a zipfian
// distribution over n items.
func Zeta(n uint64, theta float64) float64 {
	return zetaRange(0, n, theta)
}

// zetaRange returns sum_{i=from+1..to} 1/i^theta.
func zetaRange(from, to uint64, theta float64) float64 {
	if to <= from {
		return 0
	}
	exactTo := to
	if from+exactZetaTerms < to {
		exactTo = from + exactZetaTerms
	}
	sum := 0.0
	for i := from + 1; i <= exactTo; i++ {
		sum += math.Pow(float64(i), -theta)
	}
	if exactTo == to {
		return sum
	}
	// Euler-Maclaurin for f(x) = x^-theta over [a, b], a = exactTo, b = to:
	// sum_{i=a+1..b} f(i) = integral_a^b f + (f(b) - f(a))/2
	//                       + (f'(b) - f'(a))/12 - (f'''(b) - f'''(a))/720 + ...
	a, b := float64(exactTo), float64(to)
	f := func(x float64) float64 { return math.Pow(x, -theta) }
	f1 := func(x float64) float64 { return -theta * math.Pow(x, -theta-1) }
	f3 := func(x float64) float64 {
		return -theta * (theta + 1) * (theta + 2) * math.Pow(x, -theta-3)
	}
	integral := (math.Pow(b, 1-theta) - math.Pow(a, 1-theta)) / (1 - theta)
	return sum + integral + (f(b)-f(a))/2 + (f1(b)-f1(a))/12 - (f3(b)-f3(a))/720
}

// Zipfian draws item numbers in [0, Items()) with P(i) proportional to
// 1/(i+1)^theta, by Gray et al.'s method: one uniform draw, one power. It is
// exact for items 0 and 1 and follows the continuous approximation above.
// Item 0 is the most popular, so used directly it makes the lowest numbers
// hot; ScrambledZipfian spreads the hot items over the key space.
//
// A Zipfian value is immutable except through Grow; copy it to give each
// worker its own.
type Zipfian struct {
	items uint64
	theta float64
	zetan float64 // Zeta(items, theta)
	zeta2 float64 // Zeta(2, theta)
	alpha float64 // 1 / (1 - theta)
	eta   float64
	half  float64 // 1 + 0.5^theta: draws below it (scaled by zetan) are item 1
}

// NewZipfian builds a zipfian distribution over items >= 1 items with skew
// 0 < theta < 1. Building costs Zeta(items): one power per item up to 65536
// items, constant beyond.
func NewZipfian(items uint64, theta float64) Zipfian {
	if items < 1 {
		items = 1
	}
	z := Zipfian{items: items, theta: theta, zeta2: Zeta(2, theta), alpha: 1 / (1 - theta)}
	z.zetan = Zeta(items, theta)
	z.half = 1 + math.Pow(0.5, theta)
	z.setEta()
	return z
}

func (z *Zipfian) setEta() {
	z.eta = (1 - math.Pow(2/float64(z.items), 1-z.theta)) / (1 - z.zeta2/z.zetan)
}

// Items is the number of items the distribution covers.
func (z *Zipfian) Items() uint64 { return z.items }

// Grow extends the distribution to items items (no-op if it already has as
// many), adding only the new terms of the zeta sum.
func (z *Zipfian) Grow(items uint64) {
	if items <= z.items {
		return
	}
	z.zetan += zetaRange(z.items, items, z.theta)
	z.items = items
	z.setEta()
}

// Next draws an item number in [0, Items()).
func (z *Zipfian) Next(r *rand.Rand) uint64 {
	u := r.Float64()
	uz := u * z.zetan
	if uz < 1 {
		return 0
	}
	if uz < z.half && z.items > 1 {
		return 1
	}
	v := uint64(float64(z.items) * math.Pow(z.eta*u-z.eta+1, z.alpha))
	if v >= z.items {
		v = z.items - 1
	}
	return v
}

// scrambledItems is the size of the zipfian space YCSB's scrambled zipfian
// draws from before hashing into the caller's range (YCSB: ITEM_COUNT, ten
// billion), so that the popularity of an item does not depend on the record
// count.
const scrambledItems = 10_000_000_000

var scrambledBase = sync.OnceValue(func() Zipfian { return NewZipfian(scrambledItems, ZipfianTheta) })

// ScrambledZipfian is YCSB's default request distribution: a zipfian draw
// (theta 0.99) over ten billion items, hashed with FNV64 and folded into
// [0, n). The popular items are scattered over the range instead of being
// its lowest numbers, as they would be for records inserted in key order.
type ScrambledZipfian struct {
	n    uint64
	base Zipfian
}

// NewScrambledZipfian draws from [0, n), n >= 1.
func NewScrambledZipfian(n uint64) ScrambledZipfian {
	if n < 1 {
		n = 1
	}
	return ScrambledZipfian{n: n, base: scrambledBase()}
}

// Next draws a number in [0, n).
func (s *ScrambledZipfian) Next(r *rand.Rand) uint64 {
	return FNV64(s.base.Next(r)) % s.n
}

// Counter hands out record numbers for inserts and tracks which of them are
// done. Inserts finish out of order; Last is the highest number below which
// every insert has been acknowledged, so a reader that stays at or below it
// never asks for a record that is still being written (YCSB's acknowledged
// counter). It is safe for concurrent use; at most Window inserts may be
// outstanding at once (one per worker is plenty).
type Counter struct {
	next atomic.Uint64
	last atomic.Int64 // highest contiguous acknowledged number; -1 when none

	mu    sync.Mutex
	acked []bool // ring indexed by number % len(acked)
}

// Window is the largest number of inserts a Counter allows in flight.
const Window = 1 << 16

// NewCounter starts a counter whose records [0, start) already exist; the
// first Next returns start.
func NewCounter(start uint64) *Counter {
	c := &Counter{acked: make([]bool, Window)}
	c.next.Store(start)
	c.last.Store(int64(start) - 1)
	return c
}

// Next returns a fresh record number to insert.
func (c *Counter) Next() uint64 { return c.next.Add(1) - 1 }

// Acknowledge marks record number n as written (or given up on: a failed
// insert is acknowledged too, or Last would stop forever).
func (c *Counter) Acknowledge(n uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.acked[n%Window] = true
	last := c.last.Load()
	for c.acked[uint64(last+1)%Window] && uint64(last+1) < c.next.Load() {
		c.acked[uint64(last+1)%Window] = false
		last++
	}
	c.last.Store(last)
}

// Last is the highest record number such that it and every number below it
// have been acknowledged, or -1 when there is none.
func (c *Counter) Last() int64 { return c.last.Load() }

// Latest is YCSB's skewed-latest distribution: the most recently inserted
// records are the most popular. It draws a zipfian offset back from the
// counter's Last, so record Last is drawn most often, Last-1 next, and so
// on; it never returns a record whose insert is unacknowledged. Each worker
// needs its own Latest (it grows its private zipfian as records arrive).
type Latest struct {
	counter *Counter
	z       Zipfian
}

// NewLatest follows counter; base is a zipfian over the records that exist
// now (copied, so one precomputed base can seed every worker).
func NewLatest(counter *Counter, base Zipfian) *Latest {
	return &Latest{counter: counter, z: base}
}

// Next draws a record number in [0, counter.Last()]. The counter must have
// at least one acknowledged record.
func (l *Latest) Next(r *rand.Rand) uint64 {
	last := l.counter.Last()
	if last < 0 {
		return 0
	}
	max := uint64(last)
	l.z.Grow(max + 1)
	// The zipfian may cover more items than exist now only if it was built
	// for more; redraw rather than wrap.
	for {
		off := l.z.Next(r)
		if off <= max {
			return max - off
		}
	}
}

// Uniform draws uniformly from [0, n).
type Uniform struct{ n uint64 }

// NewUniform draws from [0, n), n >= 1.
func NewUniform(n uint64) Uniform {
	if n < 1 {
		n = 1
	}
	return Uniform{n: n}
}

// Next draws a number in [0, n).
func (u Uniform) Next(r *rand.Rand) uint64 { return r.Uint64N(u.n) }

// Chooser picks one of several outcomes with fixed weights (YCSB's discrete
// generator for the operation mix).
type Chooser struct {
	cum []float64 // cumulative weights
}

// NewChooser takes non-negative weights with a positive sum; outcome i is
// chosen with probability weights[i] / sum(weights).
func NewChooser(weights []float64) Chooser {
	cum := make([]float64, len(weights))
	total := 0.0
	for i, w := range weights {
		if w > 0 {
			total += w
		}
		cum[i] = total
	}
	for i := range cum {
		cum[i] /= total
	}
	return Chooser{cum: cum}
}

// Next returns the index of the chosen outcome.
func (c Chooser) Next(r *rand.Rand) int {
	u := r.Float64()
	for i, v := range c.cum {
		if u < v {
			return i
		}
	}
	// u is below 1 and the last cumulative weight is 1 up to rounding:
	// return the last outcome with a positive weight.
	for i := len(c.cum) - 1; i > 0; i-- {
		if c.cum[i] > c.cum[i-1] {
			return i
		}
	}
	return 0
}

// valueAlphabet holds the 64 characters random values are made of: letters,
// digits, '-' and '_'. Values are printable so every driver can store them in
// text columns; six random bits make one character.
const valueAlphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_"

// FillValue fills b with random printable characters.
func FillValue(r *rand.Rand, b []byte) {
	for i := 0; i < len(b); {
		x := r.Uint64()
		for j := 0; j < 10 && i < len(b); j++ {
			b[i] = valueAlphabet[x&63]
			x >>= 6
			i++
		}
	}
}
