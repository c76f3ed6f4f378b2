package tpch

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// Sizes are the row counts of a scale factor (clause 4.2.5.1): every
// count is the spec's count at SF 1 times the scale factor, at least 1.
// LINEITEM has 1 to 7 rows per order, about 6,000,000 × SF.
type Sizes struct {
	Parts, Suppliers, Customers, Orders int
}

// SizesFor returns the table sizes of scale factor sf. Below 0.01 (the
// reference generator's least) PS_SUPPKEY's formula gives some parts the
// same supplier twice.
func SizesFor(sf float64) Sizes {
	n := func(base float64) int { return max(1, int(base*sf+0.5)) }
	// PS_SUPPKEY's formula needs at least 4 suppliers to give a part 4
	// distinct ones.
	return Sizes{Parts: n(200000), Suppliers: max(4, n(10000)), Customers: n(150000), Orders: n(1500000)}
}

// Dates of clause 4.2.2.12, as days since 1992-01-01.
var epoch = time.Date(1992, 1, 1, 0, 0, 0, 0, time.UTC)

const (
	startDate   = 0             // 1992-01-01
	currentDate = 1263          // 1995-06-17
	endDate     = 2556          // 1998-12-31
	lastOrder   = endDate - 151 // O_ORDERDATE's upper bound
	chunkRows   = 1000          // parts, customers or orders per work unit
	textPoolLen = 1 << 21       // bytes of generated text comments are cut from
	tableStream = 1 << 40       // random streams: table × tableStream + chunk
)

// day formats a day number as a DATE literal.
func day(d int) string { return epoch.AddDate(0, 0, d).Format("2006-01-02") }

// rng is the random source of one work unit.
type rng struct{ *rand.Rand }

func newRng(seed uint64, table, chunk int) rng {
	return rng{rand.New(rand.NewPCG(seed, uint64(table)*tableStream+uint64(chunk)))}
}

// between returns an integer in [lo, hi].
func (r rng) between(lo, hi int) int { return lo + r.IntN(hi-lo+1) }

func (r rng) pick(list []string) string { return list[r.IntN(len(list))] }

// vstring is a v-string of clause 4.2.2.7: random length in [lo, hi] of
// characters from a 64-symbol alphabet.
func (r rng) vstring(lo, hi int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789,. "
	b := make([]byte, r.between(lo, hi))
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	return string(b)
}

// phone is clause 4.2.2.9's phone number of a nation.
func (r rng) phone(nation int) string {
	return strconv.Itoa(nation+10) + "-" + strconv.Itoa(r.between(100, 999)) + "-" +
		strconv.Itoa(r.between(100, 999)) + "-" + strconv.Itoa(r.between(1000, 9999))
}

// text is a text string of clause 4.2.2.10: a substring of the text pool
// of random length in [lo, hi] at a random offset.
func (r rng) text(pool string, lo, hi int) string {
	n := r.between(lo, hi)
	off := r.IntN(len(pool) - n)
	return strings.TrimSpace(pool[off : off+n])
}

// cents formats an amount in hundredths as a DECIMAL literal.
func cents(c int64) string {
	sign := ""
	if c < 0 {
		sign, c = "-", -c
	}
	frac := c % 100
	s := sign + strconv.FormatInt(c/100, 10) + "."
	if frac < 10 {
		s += "0"
	}
	return s + strconv.FormatInt(frac, 10)
}

// retailPrice is P_RETAILPRICE in cents (clause 4.2.3).
func retailPrice(partkey int) int64 {
	return int64(90000 + (partkey/10)%20001 + 100*(partkey%1000))
}

// partSupplier is PS_SUPPKEY (and L_SUPPKEY) for the i-th (0..3)
// supplier of a part (clause 4.2.3), s suppliers in all.
func partSupplier(partkey, i, s int) int {
	return (partkey+(i*(s/4+(partkey-1)/s)))%s + 1
}

// orderKey is the i-th (from 1) order's key: keys are sparse, the first 8
// of every 32 (clause 4.2.3).
func orderKey(i int) int { return (i/8)*32 + i%8 }

// Part is a PART row with its four PARTSUPP rows.
type Part struct {
	Key                                     int
	Name, Mfgr, Brand, Type, Container, Cmt string
	Size                                    int
	Supps                                   [4]PartSupp
}

// PartSupp is a PARTSUPP row.
type PartSupp struct {
	Supp, Avail int
	Cost        int64
	Cmt         string
}

// Order is an ORDERS row with its LINEITEM rows.
type Order struct {
	Key, Cust, Date, Clerk int
	Status, Priority, Cmt  string
	Total                  int64
	Lines                  []Line
}

// Line is a LINEITEM row. Discount and tax are in hundredths.
type Line struct {
	Part, Supp, Number, Quantity int
	Extended                     int64
	Discount, Tax                int64
	ReturnFlag, LineStatus       string
	Ship, Commit, Receipt        int
	Instruct, Mode, Cmt          string
}

// Generator produces the rows of a scale factor. Every work unit (a chunk
// of parts, suppliers, customers or orders) draws from its own random
// stream of the seed, so units can be generated in any order, by any
// number of loaders, and give the same rows.
type Generator struct {
	Seed  uint64
	Sizes Sizes
	pool  string
	// complaints and recommends are the suppliers whose comments hold
	// "Customer ... Complaints" and "Customer ... Recommends".
	complaints, recommends map[int]bool
}

// NewGenerator returns the generator of scale factor sf with a seed.
func NewGenerator(sf float64, seed uint64) *Generator {
	g := &Generator{Seed: seed, Sizes: SizesFor(sf), pool: textPool(seed)}
	// SF × 5 suppliers each (clause 4.2.3), distinct, drawn once.
	r := newRng(seed, 9, 0)
	n := max(1, int(sf*5+0.5))
	g.complaints, g.recommends = map[int]bool{}, map[int]bool{}
	perm := r.Perm(g.Sizes.Suppliers)
	for i := 0; i < n && 2*i+1 < len(perm); i++ {
		g.complaints[perm[2*i]+1] = true
		g.recommends[perm[2*i+1]+1] = true
	}
	return g
}

// Chunks returns the number of work units of n rows.
func Chunks(n int) int { return (n + chunkRows - 1) / chunkRows }

func chunkRange(chunk, n int) (int, int) {
	lo := chunk*chunkRows + 1
	return lo, min(n, lo+chunkRows-1)
}

// Parts generates chunk c of PART and PARTSUPP.
func (g *Generator) Parts(c int, emit func(*Part)) {
	r := newRng(g.Seed, 1, c)
	lo, hi := chunkRange(c, g.Sizes.Parts)
	var p Part
	for k := lo; k <= hi; k++ {
		p.Key = k
		names := r.Perm(len(colors))[:5]
		words := make([]string, 5)
		for i, n := range names {
			words[i] = colors[n]
		}
		p.Name = strings.Join(words, " ")
		m := r.between(1, 5)
		p.Mfgr = "Manufacturer#" + strconv.Itoa(m)
		p.Brand = "Brand#" + strconv.Itoa(m) + strconv.Itoa(r.between(1, 5))
		p.Type = r.pick(typeS1) + " " + r.pick(typeS2) + " " + r.pick(typeS3)
		p.Size = r.between(1, 50)
		p.Container = r.pick(containerS1) + " " + r.pick(containerS2)
		p.Cmt = r.text(g.pool, 5, 22)
		for i := range p.Supps {
			p.Supps[i] = PartSupp{
				Supp:  partSupplier(k, i, g.Sizes.Suppliers),
				Avail: r.between(1, 9999),
				Cost:  int64(r.between(100, 100000)),
				Cmt:   r.text(g.pool, 49, 198),
			}
		}
		emit(&p)
	}
}

// Supplier is a SUPPLIER row.
type Supplier struct {
	Key, Nation               int
	Name, Address, Phone, Cmt string
	Balance                   int64
}

// Suppliers generates chunk c of SUPPLIER.
func (g *Generator) Suppliers(c int, emit func(*Supplier)) {
	r := newRng(g.Seed, 2, c)
	lo, hi := chunkRange(c, g.Sizes.Suppliers)
	var s Supplier
	for k := lo; k <= hi; k++ {
		s.Key = k
		s.Name = "Supplier#" + pad9(k)
		s.Address = r.vstring(10, 40)
		s.Nation = r.between(0, 24)
		s.Phone = r.phone(s.Nation)
		s.Balance = int64(r.between(-99999, 999999))
		s.Cmt = r.text(g.pool, 25, 100)
		switch {
		case g.complaints[k]:
			s.Cmt = embed(r, s.Cmt, "Complaints")
		case g.recommends[k]:
			s.Cmt = embed(r, s.Cmt, "Recommends")
		}
		emit(&s)
	}
}

// embed writes "Customer " ... word into a comment at a random place
// (clause 4.2.3's S_COMMENT rule), keeping its length.
func embed(r rng, cmt, word string) string {
	mark := "Customer " + r.vstring(0, 8) + word
	for len(cmt) < len(mark) {
		cmt += " " + cmt
	}
	at := r.IntN(len(cmt) - len(mark) + 1)
	return cmt[:at] + mark + cmt[at+len(mark):]
}

// Customer is a CUSTOMER row.
type Customer struct {
	Key, Nation                        int
	Name, Address, Phone, Segment, Cmt string
	Balance                            int64
}

// Customers generates chunk c of CUSTOMER.
func (g *Generator) Customers(c int, emit func(*Customer)) {
	r := newRng(g.Seed, 3, c)
	lo, hi := chunkRange(c, g.Sizes.Customers)
	var cu Customer
	for k := lo; k <= hi; k++ {
		cu.Key = k
		cu.Name = "Customer#" + pad9(k)
		cu.Address = r.vstring(10, 40)
		cu.Nation = r.between(0, 24)
		cu.Phone = r.phone(cu.Nation)
		cu.Balance = int64(r.between(-99999, 999999))
		cu.Segment = r.pick(segments)
		cu.Cmt = r.text(g.pool, 29, 116)
		emit(&cu)
	}
}

// Orders generates chunk c of ORDERS and LINEITEM.
func (g *Generator) Orders(c int, emit func(*Order)) {
	r := newRng(g.Seed, 4, c)
	lo, hi := chunkRange(c, g.Sizes.Orders)
	sz := g.Sizes
	clerks := max(1, sz.Suppliers/10)
	var o Order
	for i := lo; i <= hi; i++ {
		o.Key = orderKey(i)
		// Customers whose key is a multiple of 3 place no orders.
		for {
			o.Cust = r.between(1, sz.Customers)
			if o.Cust%3 != 0 || sz.Customers < 3 {
				break
			}
		}
		o.Date = r.between(startDate, lastOrder)
		o.Priority = r.pick(priorities)
		o.Clerk = r.between(1, clerks)
		o.Cmt = r.text(g.pool, 19, 78)
		o.Lines = o.Lines[:0]
		o.Total = 0
		shipped := 0
		n := r.between(1, 7)
		for ln := 1; ln <= n; ln++ {
			var l Line
			l.Number = ln
			l.Part = r.between(1, sz.Parts)
			l.Supp = partSupplier(l.Part, r.between(0, 3), sz.Suppliers)
			l.Quantity = r.between(1, 50)
			l.Extended = int64(l.Quantity) * retailPrice(l.Part)
			l.Discount = int64(r.between(0, 10))
			l.Tax = int64(r.between(0, 8))
			l.Ship = o.Date + r.between(1, 121)
			l.Commit = o.Date + r.between(30, 90)
			l.Receipt = l.Ship + r.between(1, 30)
			l.ReturnFlag = "N"
			if l.Receipt <= currentDate {
				l.ReturnFlag = "R"
				if r.IntN(2) == 0 {
					l.ReturnFlag = "A"
				}
			}
			l.LineStatus = "O"
			if l.Ship <= currentDate {
				l.LineStatus = "F"
				shipped++
			}
			l.Instruct = r.pick(instructions)
			l.Mode = r.pick(modes)
			l.Cmt = r.text(g.pool, 10, 43)
			// O_TOTALPRICE sums L_EXTENDEDPRICE × (1 + L_TAX) × (1 -
			// L_DISCOUNT), here in 1/1,000,000ths, rounded to cents at the
			// end.
			o.Total += l.Extended * (100 + l.Tax) * (100 - l.Discount)
			o.Lines = append(o.Lines, l)
		}
		o.Total = (o.Total + 5000) / 10000
		switch shipped {
		case n:
			o.Status = "F"
		case 0:
			o.Status = "O"
		default:
			o.Status = "P"
		}
		emit(&o)
	}
}

func pad9(n int) string {
	s := strconv.Itoa(n)
	if len(s) < 9 {
		s = strings.Repeat("0", 9-len(s)) + s
	}
	return s
}

// textPool is the text comments are cut from (clause 4.2.2.10): sentences
// of the grammar of clause 4.2.2.13, generated once per seed.
func textPool(seed uint64) string {
	r := newRng(seed, 8, 0)
	var sb strings.Builder
	sb.Grow(textPoolLen + 200)
	for sb.Len() < textPoolLen {
		sb.WriteString(sentence(r))
		sb.WriteByte(' ')
	}
	return sb.String()[:textPoolLen]
}

func sentence(r rng) string {
	var parts []string
	switch r.IntN(5) {
	case 0:
		parts = []string{nounPhrase(r), verbPhrase(r)}
	case 1:
		parts = []string{nounPhrase(r), verbPhrase(r), prepPhrase(r)}
	case 2:
		parts = []string{nounPhrase(r), verbPhrase(r), nounPhrase(r)}
	case 3:
		parts = []string{nounPhrase(r), prepPhrase(r), verbPhrase(r), nounPhrase(r)}
	default:
		parts = []string{nounPhrase(r), prepPhrase(r), verbPhrase(r), prepPhrase(r)}
	}
	return strings.Join(parts, " ") + terminators.draw(r)
}

func nounPhrase(r rng) string {
	switch r.IntN(4) {
	case 0:
		return nouns.draw(r)
	case 1:
		return adjectives.draw(r) + " " + nouns.draw(r)
	case 2:
		return adjectives.draw(r) + ", " + adjectives.draw(r) + " " + nouns.draw(r)
	default:
		return adverbs.draw(r) + " " + adjectives.draw(r) + " " + nouns.draw(r)
	}
}

func verbPhrase(r rng) string {
	switch r.IntN(4) {
	case 0:
		return verbs.draw(r)
	case 1:
		return auxiliaries.draw(r) + " " + verbs.draw(r)
	case 2:
		return verbs.draw(r) + " " + adverbs.draw(r)
	default:
		return auxiliaries.draw(r) + " " + verbs.draw(r) + " " + adverbs.draw(r)
	}
}

func prepPhrase(r rng) string { return prepositions.draw(r) + " the " + nounPhrase(r) }
