package gen

import (
	"encoding/binary"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
)

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) }

// FNV64 is 64-bit FNV-1a over the little-endian bytes, as YCSB's Utils.fnvhash64.
func TestFNV64IsFNV1aOfLittleEndianBytes(t *testing.T) {
	for _, v := range []uint64{0, 1, 2, 255, 256, 1 << 40, math.MaxUint64 - 7} {
		h := fnv.New64a()
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], v)
		h.Write(b[:])
		want := h.Sum64()
		if int64(want) < 0 {
			want = uint64(-int64(want))
		}
		if got := FNV64(v); got != want {
			t.Errorf("FNV64(%d) = %d, want %d", v, got, want)
		}
		if int64(FNV64(v)) < 0 {
			t.Errorf("FNV64(%d) has the sign bit set", v)
		}
	}
	if k := Key("user", 7); !strings.HasPrefix(k, "user") || k == Key("user", 8) {
		t.Errorf("Key: %q", k)
	}
}

func exactZeta(n uint64, theta float64) float64 {
	s := 0.0
	for i := uint64(1); i <= n; i++ {
		s += math.Pow(float64(i), -theta)
	}
	return s
}

// The zeta sum beyond a million terms is approximated; it must agree with
// the exact sum.
func TestZetaApproximationMatchesExactSum(t *testing.T) {
	for _, n := range []uint64{1, 2, 1000, exactZetaTerms, exactZetaTerms + 1, 3_000_000} {
		exact := exactZeta(n, ZipfianTheta)
		if got := Zeta(n, ZipfianTheta); math.Abs(got-exact)/exact > 1e-10 {
			t.Errorf("Zeta(%d) = %.12f, exact %.12f", n, got, exact)
		}
	}
	// Growing by pieces gives the same constant as building at once.
	z := NewZipfian(1000, ZipfianTheta)
	z.Grow(2_500_000)
	whole := NewZipfian(2_500_000, ZipfianTheta)
	if math.Abs(z.zetan-whole.zetan) > 1e-9 || math.Abs(z.eta-whole.eta) > 1e-12 {
		t.Errorf("grown zetan %.12f eta %.12f, built %.12f %.12f", z.zetan, z.eta, whole.zetan, whole.eta)
	}
	// Ten billion items (the scrambled zipfian's space): the sum grows like
	// n^(1-theta)/(1-theta), about 26.5 for theta 0.99.
	if got := Zeta(scrambledItems, ZipfianTheta); got < 26.4 || got > 26.5 {
		t.Errorf("Zeta(1e10) = %f", got)
	}
}

func counts(n int, draws int, next func() uint64) []int {
	c := make([]int, n)
	for i := 0; i < draws; i++ {
		v := next()
		if v >= uint64(n) {
			panic("out of range")
		}
		c[v]++
	}
	return c
}

// within checks that an observed frequency is within 5 standard deviations
// (binomial) of p.
func within(t *testing.T, what string, got, draws int, p float64) {
	t.Helper()
	sd := math.Sqrt(float64(draws) * p * (1 - p))
	if d := math.Abs(float64(got) - p*float64(draws)); d > 5*sd {
		t.Errorf("%s: %d of %d draws (%.4f), want %.4f +- %.4f", what, got, draws,
			float64(got)/float64(draws), p, 5*sd/float64(draws))
	}
}

func TestZipfianSkew(t *testing.T) {
	const n, draws = 1000, 1_000_000
	z := NewZipfian(n, ZipfianTheta)
	r := newRand(1)
	c := counts(n, draws, func() uint64 { return z.Next(r) })
	zn := exactZeta(n, ZipfianTheta)
	// Items 0 and 1 are drawn with their exact zipfian probabilities.
	within(t, "item 0", c[0], draws, 1/zn)
	within(t, "item 1", c[1], draws, math.Pow(2, -ZipfianTheta)/zn)
	// The hottest 10% of items get their zipfian share: about 70%, where a
	// uniform distribution would give them 10%.
	top := 0
	for _, v := range c[:n/10] {
		top += v
	}
	want := exactZeta(n/10, ZipfianTheta) / zn
	if got := float64(top) / draws; math.Abs(got-want) > 0.02 {
		t.Errorf("top 10%% of items drew %.3f of the draws, want %.3f", got, want)
	}
	// Popularity falls with the item number.
	for i := 1; i < 5; i++ {
		if c[i] >= c[i-1] {
			t.Errorf("item %d drawn %d times, item %d %d times", i, c[i], i-1, c[i-1])
		}
	}
}

func TestScrambledZipfianScattersHotKeysAndCoversAll(t *testing.T) {
	const n, draws = 1000, 1_000_000
	s := NewScrambledZipfian(n)
	r := newRand(2)
	c := counts(n, draws, func() uint64 { return s.Next(r) })
	// The hottest key is where the hash puts zipfian item 0, not key 0.
	hot := FNV64(0) % n
	best := 0
	for i := range c {
		if c[i] > c[best] {
			best = i
		}
	}
	if uint64(best) != hot {
		t.Errorf("hottest key %d (%d draws), want FNV64(0)%%n = %d (%d draws)", best, c[best], hot, c[hot])
	}
	// Item 0 of ten billion has probability 1/Zeta(1e10) (3.8%); tail items
	// hashed onto the same key add to it.
	zn := Zeta(scrambledItems, ZipfianTheta)
	if p0, sd := 1/zn, math.Sqrt(draws/zn); float64(c[hot]) < p0*draws-5*sd {
		t.Errorf("hottest key drew %d of %d, want at least %.0f", c[hot], draws, p0*draws-5*sd)
	}
	// The ten hottest keys hold at least the ten hottest zipfian items'
	// share (10.8%), a hundred times a uniform distribution's 0.1%.
	sorted := append([]int(nil), c...)
	sort.Sort(sort.Reverse(sort.IntSlice(sorted)))
	top := 0
	for _, v := range sorted[:10] {
		top += v
	}
	if share := float64(top) / draws; share < Zeta(10, ZipfianTheta)/zn {
		t.Errorf("ten hottest keys drew %.3f of the draws, want >= %.3f", share, Zeta(10, ZipfianTheta)/zn)
	}
	// The long tail is scattered over every key.
	for i, v := range c {
		if v == 0 {
			t.Fatalf("key %d never drawn", i)
		}
	}
}

func TestUniformCoverage(t *testing.T) {
	const n, draws = 100, 100_000
	u := NewUniform(n)
	r := newRand(3)
	c := counts(n, draws, func() uint64 { return u.Next(r) })
	chi := 0.0
	exp := float64(draws) / n
	for _, v := range c {
		chi += (float64(v) - exp) * (float64(v) - exp) / exp
	}
	// 99 degrees of freedom: P(chi2 > 148.2) = 0.001.
	if chi > 148.2 {
		t.Errorf("chi-squared %.1f over %d buckets: not uniform", chi, n)
	}
}

func TestCounterLastWaitsForContiguousAcks(t *testing.T) {
	c := NewCounter(10)
	if c.Last() != 9 {
		t.Fatalf("Last = %d, want 9", c.Last())
	}
	a, b, d := c.Next(), c.Next(), c.Next()
	if a != 10 || b != 11 || d != 12 {
		t.Fatalf("Next gave %d %d %d", a, b, d)
	}
	c.Acknowledge(12)
	c.Acknowledge(11)
	if c.Last() != 9 {
		t.Errorf("Last = %d before 10 is acknowledged, want 9", c.Last())
	}
	c.Acknowledge(10)
	if c.Last() != 12 {
		t.Errorf("Last = %d after 10..12 acknowledged, want 12", c.Last())
	}
	// Around the ring.
	for i := 0; i < 3*Window; i++ {
		c.Acknowledge(c.Next())
	}
	if want := int64(12 + 3*Window); c.Last() != want {
		t.Errorf("Last = %d, want %d", c.Last(), want)
	}
	if NewCounter(0).Last() != -1 {
		t.Errorf("empty counter: Last != -1")
	}
}

func TestLatestFavoursRecentInserts(t *testing.T) {
	const n, draws = 1000, 200_000
	c := NewCounter(n)
	l := NewLatest(c, NewZipfian(n, ZipfianTheta))
	r := newRand(4)
	cnt := counts(2*n+1, draws, func() uint64 { return l.Next(r) })
	zn := exactZeta(n, ZipfianTheta)
	within(t, "newest record", cnt[n-1], draws, 1/zn)
	within(t, "second newest", cnt[n-2], draws, math.Pow(2, -ZipfianTheta)/zn)
	for i := n; i <= 2*n; i++ {
		if cnt[i] != 0 {
			t.Fatalf("record %d drawn before it was inserted", i)
		}
	}

	// Insert n more; one is still in flight. The new records take over.
	pending := uint64(0)
	for i := 0; i <= n; i++ {
		k := c.Next()
		if i == n {
			pending = k
			break
		}
		c.Acknowledge(k)
	}
	cnt = counts(2*n+1, draws, func() uint64 { return l.Next(r) })
	if cnt[pending] != 0 {
		t.Errorf("unacknowledged record %d drawn %d times", pending, cnt[pending])
	}
	zn2 := exactZeta(2*n, ZipfianTheta)
	within(t, "newest record after inserts", cnt[2*n-1], draws, 1/zn2)
	recent := 0
	for i := n; i < 2*n; i++ {
		recent += cnt[i]
	}
	// Offsets 0..n-1 back from the newest: Zeta(n)/Zeta(2n) of the mass, 92%.
	if share, want := float64(recent)/draws, zn/zn2; math.Abs(share-want) > 0.01 {
		t.Errorf("records inserted last drew %.3f of the draws, want %.3f", share, want)
	}
}

func TestChooserProportions(t *testing.T) {
	weights := []float64{0.5, 0, 0.45, 0.05}
	ch := NewChooser(weights)
	r := newRand(5)
	const draws = 200_000
	c := make([]int, len(weights))
	for i := 0; i < draws; i++ {
		c[ch.Next(r)]++
	}
	for i, w := range weights {
		if w == 0 {
			if c[i] != 0 {
				t.Errorf("outcome %d has weight 0 but was chosen %d times", i, c[i])
			}
			continue
		}
		within(t, "outcome", c[i], draws, w)
	}
}

func TestFillValuePrintable(t *testing.T) {
	r := newRand(6)
	b := make([]byte, 1000)
	FillValue(r, b)
	seen := map[byte]bool{}
	for _, x := range b {
		if !strings.ContainsRune(valueAlphabet, rune(x)) {
			t.Fatalf("byte %q not in the alphabet", x)
		}
		seen[x] = true
	}
	if len(seen) < 60 {
		t.Errorf("only %d distinct characters in 1000", len(seen))
	}
}
