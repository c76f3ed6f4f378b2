package client

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	ikv "github.com/strata-db/strata/internal/kv"
	"github.com/strata-db/strata/kvpb"
)

// splitKeys cuts the key space between a range's first and last key
// into parts of about equal size, each boundary strictly inside.
func TestSplitKeys(t *testing.T) {
	prefix := []byte("t\x80\x00\x00\x00\x00\x00\x00\x07_r")
	key := func(h uint64) []byte {
		k := append(bytes.Clone(prefix), 0, 0, 0, 0, 0, 0, 0, 0)
		for i := 0; i < 8; i++ {
			k[len(prefix)+i] = byte(h >> (56 - 8*i))
		}
		return k
	}
	first, last := key(1<<63+1), key(1<<63+1_000_000)
	got := splitKeys(first, last, 4)
	if len(got) != 3 {
		t.Fatalf("%d boundaries, want 3", len(got))
	}
	prev := first
	for _, k := range got {
		if bytes.Compare(k, prev) <= 0 || bytes.Compare(k, last) >= 0 {
			t.Fatalf("boundary %x not between %x and %x", k, prev, last)
		}
		prev = k
	}
	// About a quarter of the handles fall below the first boundary.
	if lo, hi := key(1<<63+1+249_000), key(1<<63+1+251_000); bytes.Compare(got[0], lo) < 0 || bytes.Compare(got[0], hi) > 0 {
		t.Errorf("first boundary %x is not about a quarter of the way", got[0])
	}
	if got := splitKeys(first, first, 4); got != nil {
		t.Errorf("one key split into %d parts", len(got)+1)
	}
	if got := splitKeys(first, last, 1); got != nil {
		t.Errorf("one part has boundaries %x", got)
	}
	// Keys that differ after the prefix in a shorter tail.
	if got := splitKeys([]byte("a"), []byte("b"), 2); len(got) != 1 || bytes.Compare(got[0], []byte("a")) <= 0 || bytes.Compare(got[0], []byte("b")) >= 0 {
		t.Errorf("split of [a, b]: %q", got)
	}
}

// A task of many ranges sends, per region, the parts of its ranges in the
// region, and goes on with what is left past it (forward) or before it
// (reverse), or past a page's resume key.
func TestTaskRangesByRegion(t *testing.T) {
	kr := func(s, e string) ikv.KeyRange {
		r := ikv.KeyRange{Start: []byte(s)}
		if e != "" {
			r.End = []byte(e)
		}
		return r
	}
	show := func(rs []ikv.KeyRange) string {
		var sb strings.Builder
		for _, r := range rs {
			fmt.Fprintf(&sb, "[%s,%s)", r.Start, r.End)
		}
		return sb.String()
	}
	showPB := func(rs []*kvpb.KeyRange) string {
		var sb strings.Builder
		for _, r := range rs {
			fmt.Fprintf(&sb, "[%s,%s)", r.Start, r.End)
		}
		return sb.String()
	}
	ranges := []ikv.KeyRange{kr("b", "c"), kr("d", "f"), kr("g", "h"), kr("m", "")}
	for _, tc := range []struct{ name, got, want string }{
		{"forward, region ends inside a range", showPB(regionRanges(ranges, []byte("e"))), "[b,c)[d,e)"},
		{"forward, region ends between ranges", showPB(regionRanges(ranges, []byte("g"))), "[b,c)[d,f)"},
		{"forward, last region", showPB(regionRanges(ranges, nil)), "[b,c)[d,f)[g,h)[m,)"},
		{"reverse, region starts inside a range", showPB(regionRangesReverse(ranges, []byte("n"))), "[n,)"},
		{"reverse, region starts between ranges", showPB(regionRangesReverse(ranges, []byte("cc"))), "[d,f)[g,h)[m,)"},
		{"reverse, region starts inside an earlier range", showPB(regionRangesReverse(ranges, []byte("e"))), "[e,f)[g,h)[m,)"},
		{"reverse, first region", showPB(regionRangesReverse(ranges, nil)), "[b,c)[d,f)[g,h)[m,)"},
		{"left past a key inside a range", show(rangesFrom(ranges, []byte("e"))), "[e,f)[g,h)[m,)"},
		{"left past a range's end", show(rangesFrom(ranges, []byte("f"))), "[g,h)[m,)"},
		{"left past a key in the open range", show(rangesFrom(ranges, []byte("z"))), "[z,)"},
		{"left before a key inside a range", show(rangesBelow(ranges, []byte("e"))), "[b,c)[d,e)"},
		{"left before a range's start", show(rangesBelow(ranges, []byte("g"))), "[b,c)[d,f)"},
		{"left before the first key", show(rangesBelow(ranges, []byte("b"))), ""},
		{"input unchanged", show(ranges), "[b,c)[d,f)[g,h)[m,)"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, tc.got, tc.want)
		}
	}
}
