package resp

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-db/strata/internal/kv/kvtest"
)

// TestConcurrentIncrementsAreNotLost: many connections incrementing one key,
// some pipelining, through the shared batches (and with several batches in
// flight, which must still run a key's commands one at a time): every
// increment is counted once and every connection sees its replies in order.
func TestConcurrentIncrementsAreNotLost(t *testing.T) {
	for _, inFlight := range []int{1, 3} {
		t.Run(fmt.Sprintf("batches-in-flight=%d", inFlight), func(t *testing.T) {
			srv, err := New(Config{Addr: "127.0.0.1:0", ReapInterval: time.Hour, BatchesInFlight: inFlight}, kvtest.NewMemStorage())
			if err != nil {
				t.Fatal(err)
			}
			go srv.Serve()
			defer srv.Close()
			const clients, rounds, depth = 8, 50, 4
			var wg sync.WaitGroup
			errs := make(chan error, clients)
			for c := 0; c < clients; c++ {
				wg.Add(1)
				go func(c int) {
					defer wg.Done()
					conn := dialTest(t, srv.Addr().String())
					defer conn.Close()
					for r := 0; r < rounds; r++ {
						// A pipeline: INCR, a write of this client's key, a read of it.
						var b strings.Builder
						for i := 0; i < depth; i++ {
							fmt.Fprintf(&b, "INCR counter\r\nSET own%d %d\r\nGET own%d\r\n", c, r*depth+i, c)
						}
						if _, err := conn.Write([]byte(b.String())); err != nil {
							errs <- err
							return
						}
						for i := 0; i < depth; i++ {
							if _, err := readReply(conn.r, ""); err != nil {
								errs <- err
								return
							}
							if rep, _ := readReply(conn.r, ""); rep != "OK\n" {
								errs <- fmt.Errorf("SET replied %q", rep)
								return
							}
							want := fmt.Sprintf("%q\n", fmt.Sprint(r*depth+i))
							if rep, _ := readReply(conn.r, ""); rep != want {
								errs <- fmt.Errorf("client %d: GET after its own SET replied %q, want %q", c, rep, want)
								return
							}
						}
					}
				}(c)
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			conn := dialTest(t, srv.Addr().String())
			defer conn.Close()
			conn.Write([]byte("GET counter\r\n"))
			rep, err := readReply(conn.r, "")
			if want := fmt.Sprintf("%q\n", fmt.Sprint(clients*rounds*depth)); err != nil || rep != want {
				t.Fatalf("counter = %q (%v), want %s", rep, err, want)
			}
		})
	}
}
