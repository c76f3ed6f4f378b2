package cli

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseQueries(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []int
		err  bool
	}{
		{"", nil, false},
		{"1", []int{1}, false},
		{"1,3,5-7", []int{1, 3, 5, 6, 7}, false},
		{" 22 ", []int{22}, false},
		{"0", nil, true},
		{"23", nil, true},
		{"7-5", nil, true},
		{"1-x", nil, true},
		{"q1", nil, true},
	} {
		got, err := parseQueries(c.in)
		if (err != nil) != c.err || !reflect.DeepEqual(got, c.want) {
			t.Errorf("parseQueries(%q) = %v, %v; want %v, error %v", c.in, got, err, c.want, c.err)
		}
	}
}

func TestTPCHFlags(t *testing.T) {
	var out, errb bytes.Buffer
	err := Main(context.Background(), []string{"run", "tpch", "-h"}, &out, &errb)
	if !errors.Is(err, ErrUsage) || !strings.Contains(errb.String(), "--scale-factor") {
		t.Errorf("-h: %v\n%s", err, errb.String())
	}
	for _, args := range [][]string{
		{"run", "tpch", "--scale-factor", "0.001"},
		{"run", "tpch", "--queries", "0"},
		{"run", "tpch", "--repeats", "0"},
		{"run", "tpch", "--drop"},
	} {
		if err := Main(context.Background(), args, &out, &errb); err == nil || errors.Is(err, ErrUsage) {
			t.Errorf("%v: %v, want an error that explains the flag", args, err)
		}
	}
}
