package resp

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// newClient is a go-redis client of the target speaking RESP proto (2 or
// 3). Retries are off: a test must see every error the server sends, and a
// retried INCR would count twice.
func newClient(t testing.TB, proto int) *redis.Client {
	t.Helper()
	return newClientOpts(t, &redis.Options{Addr: tgt(t).addr, Protocol: proto})
}

func newClientOpts(t testing.TB, opts *redis.Options) *redis.Client {
	t.Helper()
	opts.MaxRetries = -1
	if opts.DialTimeout == 0 {
		opts.DialTimeout = 5 * time.Second
	}
	if opts.ReadTimeout == 0 {
		opts.ReadTimeout = 10 * time.Second
		opts.WriteTimeout = 10 * time.Second
	}
	c := redis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	return c
}

// eachProto runs f once with a RESP2 and once with a RESP3 go-redis
// client, each time on an empty keyspace.
func eachProto(t *testing.T, f func(t *testing.T, c *redis.Client)) {
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprintf("resp%d", proto), func(t *testing.T) {
			fresh(t)
			f(t, newClient(t, proto))
		})
	}
}

// cmdResult is a go-redis command with a typed result.
type cmdResult[T any] interface {
	redis.Cmder
	Result() (T, error)
}

// eq checks that cmd succeeded with want.
func eq[T any](t testing.TB, cmd cmdResult[T], want T) {
	t.Helper()
	got, err := cmd.Result()
	if err != nil {
		t.Errorf("%v: error %v, want %#v", cmd.Args(), err, want)
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%v: got %#v, want %#v", cmd.Args(), got, want)
	}
}

// val returns cmd's result, failing the test on an error.
func val[T any](t testing.TB, cmd cmdResult[T]) T {
	t.Helper()
	got, err := cmd.Result()
	if err != nil {
		t.Fatalf("%v: %v", cmd.Args(), err)
	}
	return got
}

// isErr checks that cmd failed with exactly the error text want.
func isErr(t testing.TB, cmd redis.Cmder, want string) {
	t.Helper()
	err := cmd.Err()
	if err == nil {
		t.Errorf("%v: succeeded (%v), want error %q", cmd.Args(), cmd, want)
		return
	}
	if err.Error() != want {
		t.Errorf("%v: error %q, want %q", cmd.Args(), err.Error(), want)
	}
}

// isNil checks that cmd got a null reply.
func isNil(t testing.TB, cmd redis.Cmder) {
	t.Helper()
	if err := cmd.Err(); !errors.Is(err, redis.Nil) {
		t.Errorf("%v: got %v (err %v), want nil", cmd.Args(), cmd, err)
	}
}

// noErr checks that cmd succeeded.
func noErr(t testing.TB, cmd redis.Cmder) {
	t.Helper()
	if err := cmd.Err(); err != nil {
		t.Fatalf("%v: %v", cmd.Args(), err)
	}
}

// sameSet compares string slices as sets (with multiplicity).
func sameSet(t testing.TB, what string, got, want []string) {
	t.Helper()
	g := append([]string(nil), got...)
	w := append([]string(nil), want...)
	sort.Strings(g)
	sort.Strings(w)
	if len(g) == 0 && len(w) == 0 {
		return
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s: got %q, want %q", what, g, w)
	}
}

// within checks lo <= d <= hi.
func within(t testing.TB, what string, d, lo, hi time.Duration) {
	t.Helper()
	if d < lo || d > hi {
		t.Errorf("%s: %v, want between %v and %v", what, d, lo, hi)
	}
}
