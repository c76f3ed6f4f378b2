package resp

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// serverRSS returns the resident memory of the strata process in bytes, or
// 0 against Redis.
func serverRSS(t *testing.T) int64 {
	t.Helper()
	tg := tgt(t)
	if tg.node == nil {
		return 0
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", tg.node.PID()))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/PID/status")
	return 0
}

// TestValueSizeLimit checks the configured size limit (1 MiB here): a value
// of exactly the limit is stored and read back; a bulk announced one byte
// longer, or 2 GiB long, is refused before it arrives (the server neither
// waits for nor allocates it); and growing a value past the limit with
// APPEND or SETRANGE fails without changing it.
func TestValueSizeLimit(t *testing.T) {
	fresh(t)
	rssBefore := serverRSS(t)
	limit := sharedMaxValueSize
	big := strings.Repeat("x", limit)

	w := dialWire(t)
	w.expect(t, "+OK", "SET", "big", big)
	if got := w.do(t, "GET", "big"); got.str != big {
		t.Fatalf("GET of a value of exactly the limit returned %d bytes", len(got.str))
	}
	w.expect(t, fmt.Sprintf(":%d", limit), "STRLEN", "big")

	for _, announced := range []int64{int64(limit) + 1, 1 << 31, 1<<31 - 1, 1 << 40} {
		w := dialWire(t)
		w.write(t, fmt.Sprintf("*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n$%d\r\n", announced))
		got := w.read(t)
		if got.String() != "-ERR Protocol error: invalid bulk length" {
			t.Errorf("bulk of %d bytes announced: %s, want -ERR Protocol error: invalid bulk length", announced, got)
		}
		w.expectClosed(t)
	}
	if err := pingOnce(tgt(t).addr, ""); err != nil {
		t.Fatalf("server does not answer after huge bulk lengths: %v", err)
	}

	w = dialWire(t)
	w.expect(t, fmt.Sprintf(":%d", limit), "STRLEN", "big")
	w.expect(t, "+OK", "SET", "almost", big[:limit-4])
	const tooBig = "-ERR string exceeds maximum allowed size"
	for _, cmd := range [][]string{
		{"APPEND", "almost", "12345"},
		{"APPEND", "big", "x"},
		{"SETRANGE", "almost", fmt.Sprint(limit - 4), "12345"},
		{"SETRANGE", "new", fmt.Sprint(limit), "x"},
		{"SETRANGE", "new", "9223372036854775000", "x"},
	} {
		got := w.do(t, cmd...).String()
		if !strings.HasPrefix(got, tooBig) {
			t.Errorf("%q: %s, want an error starting with %q", cmd, got, tooBig)
		}
	}
	w.expect(t, fmt.Sprintf(":%d", limit-4), "STRLEN", "almost")
	w.expect(t, ":0", "EXISTS", "new")
	// Up to the limit exactly is fine.
	w.expect(t, fmt.Sprintf(":%d", limit), "APPEND", "almost", "1234")
	w.expect(t, fmt.Sprintf(":%d", limit), "SETRANGE", "new", fmt.Sprint(limit-1), "x")
	w.expect(t, "+PONG", "PING")

	if rssBefore > 0 {
		// Two stored 1 MiB values and their copies in flight are fine;
		// the 2 GiB and 1 TiB announcements must not have been allocated.
		if grew := serverRSS(t) - rssBefore; grew > 256<<20 {
			t.Errorf("strata's resident memory grew by %d MiB during the size limit test", grew>>20)
		}
	}
}

// TestTooBigInlineAndCount sends an inline command and a multibulk count
// line longer than 64 KiB without a line end: Redis refuses both rather
// than buffering without bound.
func TestTooBigInlineAndCount(t *testing.T) {
	fresh(t)
	for _, tc := range []struct{ in, want string }{
		{strings.Repeat("a", 70000), "-ERR Protocol error: too big inline request"},
		{"*" + strings.Repeat("1", 70000), "-ERR Protocol error: too big mbulk count string"},
		{"*1\r\n$" + strings.Repeat("1", 70000), "-ERR Protocol error: too big bulk count string"},
	} {
		w := dialWire(t)
		w.write(t, tc.in)
		if got := w.read(t).String(); got != tc.want {
			t.Errorf("%.10q... (%d bytes, no line end): %s, want %s", tc.in, len(tc.in), got, tc.want)
		}
		w.expectClosed(t)
	}
	if err := pingOnce(tgt(t).addr, ""); err != nil {
		t.Fatal(err)
	}
}

// TestPipelining10k sends 10,000 commands in a single write, then 10,000
// reads in another, and checks every reply in order.
func TestPipelining10k(t *testing.T) {
	fresh(t)
	const n = 10000
	w := dialWire(t)
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteString(encodeCommand("SET", fmt.Sprintf("p:%d", i), fmt.Sprintf("v%d", i)))
	}
	w.write(t, b.String())
	for i := 0; i < n; i++ {
		if got := w.read(t); got.String() != "+OK" {
			t.Fatalf("reply %d to pipelined SETs: %s", i, got)
		}
	}
	b.Reset()
	for i := 0; i < n; i++ {
		switch i % 3 {
		case 0:
			b.WriteString(encodeCommand("GET", fmt.Sprintf("p:%d", i)))
		case 1:
			b.WriteString(encodeCommand("INCR", "counter"))
		case 2:
			b.WriteString(fmt.Sprintf("EXISTS p:%d nope\r\n", i)) // inline
		}
	}
	w.write(t, b.String())
	incr := 0
	for i := 0; i < n; i++ {
		var want string
		switch i % 3 {
		case 0:
			want = fmt.Sprintf("%q", fmt.Sprintf("v%d", i))
		case 1:
			incr++
			want = fmt.Sprintf(":%d", incr)
		case 2:
			want = ":1"
		}
		if got := w.read(t).String(); got != want {
			t.Fatalf("reply %d of the mixed pipeline: %s, want %s", i, got, want)
		}
	}
	w.expect(t, fmt.Sprintf(":%d", n+1), "DBSIZE")
}

// TestSlowWriter sends commands one byte at a time: the server must
// assemble them across reads.
func TestSlowWriter(t *testing.T) {
	fresh(t)
	w := dialWire(t)
	in := encodeCommand("SET", "slow", "value") + "GET slow\r\n" + encodeCommand("PING")
	for i := 0; i < len(in); i++ {
		w.write(t, in[i:i+1])
		time.Sleep(time.Millisecond)
	}
	for _, want := range []string{"+OK", `"value"`, "+PONG"} {
		if got := w.read(t).String(); got != want {
			t.Fatalf("got %s, want %s", got, want)
		}
	}
}

// TestManyClients runs 50 connections at once, each incrementing a shared
// counter and its own key.
func TestManyClients(t *testing.T) {
	fresh(t)
	const clients, rounds = 50, 20
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for c := 0; c < clients; c++ {
		w := dialWire(t)
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for i := 1; i <= rounds; i++ {
				w.c.SetDeadline(time.Now().Add(wireTimeout))
				if _, err := w.c.Write([]byte(encodeCommand("INCR", "shared") + encodeCommand("INCR", fmt.Sprintf("own:%d", c)))); err != nil {
					errs <- err
					return
				}
				if _, err := w.tryRead(); err != nil {
					errs <- err
					return
				}
				rep, err := w.tryRead()
				if err != nil || rep.String() != fmt.Sprintf(":%d", i) {
					errs <- fmt.Errorf("client %d round %d: INCR own: %v %v", c, i, rep, err)
					return
				}
			}
		}(c)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	w := dialWire(t)
	w.expect(t, fmt.Sprintf(`"%d"`, clients*rounds), "GET", "shared")
	w.expect(t, fmt.Sprintf(":%d", clients+1), "DBSIZE")
}
