package tpch

import (
	"strconv"
	"strings"
	"testing"
)

// The generator's rows follow the spec's rules (clause 4.2.3) and do not
// depend on the order chunks are generated in.
func TestGeneratorRules(t *testing.T) {
	const sf = 0.01
	g := NewGenerator(sf, DefaultSeed)
	sz := g.Sizes
	if sz != (Sizes{Parts: 2000, Suppliers: 100, Customers: 1500, Orders: 15000}) {
		t.Fatalf("sizes %+v", sz)
	}
	pairs := map[[2]int]bool{}
	for c := 0; c < Chunks(sz.Parts); c++ {
		g.Parts(c, func(p *Part) {
			if len(strings.Fields(p.Name)) != 5 || !strings.HasPrefix(p.Brand, "Brand#"+p.Mfgr[len(p.Mfgr)-1:]) ||
				p.Size < 1 || p.Size > 50 || len(p.Cmt) > 23 {
				t.Fatalf("part %+v", p)
			}
			for _, s := range p.Supps {
				if s.Supp < 1 || s.Supp > sz.Suppliers || pairs[[2]int{p.Key, s.Supp}] || s.Cost < 100 || s.Cost > 100000 {
					t.Fatalf("part %d supplier %+v", p.Key, s)
				}
				pairs[[2]int{p.Key, s.Supp}] = true
			}
		})
	}
	complaints := 0
	for c := 0; c < Chunks(sz.Suppliers); c++ {
		g.Suppliers(c, func(s *Supplier) {
			if i := strings.Index(s.Cmt, "Customer "); i >= 0 && strings.Contains(s.Cmt[i:], "Complaints") {
				complaints++
			}
			if !strings.HasPrefix(s.Phone, itoa(s.Nation+10)+"-") || len(s.Cmt) > 101 {
				t.Fatalf("supplier %+v", s)
			}
		})
	}
	if complaints < 1 {
		t.Errorf("no supplier comment holds Customer...Complaints")
	}
	keys := map[int]bool{}
	lines := 0
	for c := 0; c < Chunks(sz.Orders); c++ {
		g.Orders(c, func(o *Order) {
			if keys[o.Key] || o.Key < 1 || o.Key%32 > 7 { // 1-7, 32-39, 64-71...
				t.Fatalf("order key %d", o.Key)
			}
			keys[o.Key] = true
			if o.Cust%3 == 0 || o.Date > lastOrder || len(o.Lines) < 1 || len(o.Lines) > 7 {
				t.Fatalf("order %+v", o)
			}
			var total int64
			shipped := 0
			for _, l := range o.Lines {
				lines++
				total += l.Extended * (100 + l.Tax) * (100 - l.Discount)
				if l.Extended != int64(l.Quantity)*retailPrice(l.Part) || l.Receipt <= l.Ship || l.Ship <= o.Date ||
					(l.ReturnFlag == "N") != (l.Receipt > currentDate) || (l.LineStatus == "F") != (l.Ship <= currentDate) {
					t.Fatalf("order %d line %+v", o.Key, l)
				}
				found := false
				for i := 0; i < 4; i++ {
					found = found || partSupplier(l.Part, i, sz.Suppliers) == l.Supp
				}
				if !found {
					t.Fatalf("line supplier %d does not supply part %d", l.Supp, l.Part)
				}
				if l.LineStatus == "F" {
					shipped++
				}
			}
			if o.Total != (total+5000)/10000 {
				t.Fatalf("order %d total %d, lines sum to %d", o.Key, o.Total, total)
			}
			want := map[bool]string{true: "F", false: "P"}[shipped == len(o.Lines)]
			if shipped == 0 {
				want = "O"
			}
			if o.Status != want {
				t.Fatalf("order %d status %s, want %s", o.Key, o.Status, want)
			}
		})
	}
	// Chunks are independent: generating one again gives the same rows.
	var first, again []Order
	g.Orders(3, func(o *Order) { first = append(first, cloneOrder(o)) })
	NewGenerator(sf, DefaultSeed).Orders(3, func(o *Order) { again = append(again, cloneOrder(o)) })
	for i := range first {
		if first[i].Key != again[i].Key || first[i].Cmt != again[i].Cmt || first[i].Total != again[i].Total {
			t.Fatalf("chunk 3 differs on a second generation")
		}
	}
	if e := Reference(sf, DefaultSeed); e.Counts["lineitem"] != int64(lines) {
		t.Errorf("reference counts %d lines, generated %d", e.Counts["lineitem"], lines)
	}
}

func cloneOrder(o *Order) Order {
	c := *o
	c.Lines = append([]Line(nil), o.Lines...)
	return c
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestCompare(t *testing.T) {
	for _, c := range []struct {
		got, want Result
		same      bool
	}{
		{Result{{"A", "1.00"}}, Result{{"A", "1"}}, true},
		{Result{{"A", "38250854.6264"}}, Result{{"A", "38250854.626400"}}, true},
		{Result{{"0.01666667"}}, Result{{"0.0167"}}, true},
		{Result{{"1.004"}}, Result{{"1.026"}}, false},
		{Result{{"A", "1"}}, Result{{"B", "1"}}, false},
		{Result{{"A"}, {"B"}}, Result{{"B"}, {"A"}}, true}, // ties in any order
		{Result{{"A"}}, Result{{"A"}, {"B"}}, false},
		{Result{{"NULL"}}, Result{{"0"}}, false},
	} {
		if got := Compare(c.got, c.want) == ""; got != c.same {
			t.Errorf("Compare(%v, %v) same=%v, want %v", c.got, c.want, got, c.same)
		}
	}
}

func TestQueries(t *testing.T) {
	for q := 1; q <= NumQueries; q++ {
		if s := Query(q, 1); s == "" || strings.Count(s, "(") != strings.Count(s, ")") {
			t.Errorf("Q%d: %q", q, s)
		}
	}
	if !strings.Contains(Query(11, 0.1), "* 0.001\n") {
		t.Errorf("Q11's FRACTION at SF 0.1 is not 0.001: %s", Query(11, 0.1))
	}
}
