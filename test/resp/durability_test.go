package resp

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/strata-db/strata/test/integration"
)

// TestAcknowledgedWritesSurviveKill9: writers SET distinct keys and INCR a
// counter as fast as they can; the strata process is killed with SIGKILL
// in the middle; after a restart on the same data directory every SET that
// was acknowledged is there with its value, and the counter is at least
// the last acknowledged INCR result. Two rounds, so the second crash hits
// a node that already recovered once.
func TestAcknowledgedWritesSurviveKill9(t *testing.T) {
	strataOnly(t)
	n := integration.StartNode(t)
	if err := waitRESP(n.RESPAddr, 15*time.Second); err != nil {
		t.Fatal(err)
	}
	const writers = 6
	acked := map[string]string{} // key -> value of every acknowledged SET
	var ackedMu sync.Mutex
	var maxIncr atomic.Int64 // largest acknowledged INCR result
	var seq [writers]int

	for round := 0; round < 2; round++ {
		var ackedThisRound atomic.Int64
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for w := 0; w < writers; w++ {
			c := redis.NewClient(&redis.Options{Addr: n.RESPAddr, Protocol: 2, PoolSize: 1, MaxRetries: -1,
				DialTimeout: time.Second, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second})
			wg.Add(1)
			go func(w int, c *redis.Client) {
				defer wg.Done()
				defer c.Close()
				ctx := t.Context()
				for {
					select {
					case <-stop:
						return
					default:
					}
					var err error
					if w == 0 {
						// One writer increments the counter.
						var v int64
						if v, err = c.Incr(ctx, "counter").Result(); err == nil {
							for {
								cur := maxIncr.Load()
								if v <= cur || maxIncr.CompareAndSwap(cur, v) {
									break
								}
							}
						}
					} else {
						seq[w]++
						k, v := fmt.Sprintf("w%d:%d", w, seq[w]), fmt.Sprintf("round %d writer %d seq %d", round, w, seq[w])
						if err = c.Set(ctx, k, v, 0).Err(); err == nil {
							ackedMu.Lock()
							acked[k] = v
							ackedMu.Unlock()
						}
					}
					if err != nil {
						// The node is gone: wait for the test to stop us.
						<-stop
						return
					}
					ackedThisRound.Add(1)
				}
			}(w, c)
		}
		// Let writes flow, then kill the process under load.
		deadline := time.Now().Add(20 * time.Second)
		for ackedThisRound.Load() < 1500 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		n.Kill()
		close(stop)
		wg.Wait()
		t.Logf("round %d: killed after %d acknowledged writes this round", round, ackedThisRound.Load())
		if ackedThisRound.Load() == 0 {
			t.Fatal("no write was acknowledged before the kill")
		}

		n.Start()
		if err := waitRESP(n.RESPAddr, 30*time.Second); err != nil {
			t.Fatalf("after restart: %v", err)
		}
		c := redis.NewClient(&redis.Options{Addr: n.RESPAddr, Protocol: 2, MaxRetries: -1})
		ctx := t.Context()
		keys := make([]string, 0, len(acked))
		for k := range acked {
			keys = append(keys, k)
		}
		missing := 0
		for start := 0; start < len(keys); start += 500 {
			end := min(start+500, len(keys))
			vals, err := c.MGet(ctx, keys[start:end]...).Result()
			if err != nil {
				t.Fatal(err)
			}
			for i, v := range vals {
				k := keys[start+i]
				if v != acked[k] {
					missing++
					if missing <= 10 {
						t.Errorf("acknowledged SET %s = %q: after restart %v", k, acked[k], v)
					}
				}
			}
		}
		if missing > 0 {
			t.Fatalf("round %d: %d of %d acknowledged SETs lost or wrong after kill -9", round, missing, len(acked))
		}
		counter, err := c.Get(ctx, "counter").Int64()
		if err != nil && maxIncr.Load() > 0 {
			t.Fatalf("counter after restart: %v", err)
		}
		if counter < maxIncr.Load() {
			t.Fatalf("counter is %d after restart, but INCR had acknowledged %d", counter, maxIncr.Load())
		}
		c.Close()
		t.Logf("round %d: %d acknowledged SETs present, counter %d >= %d", round, len(acked), counter, maxIncr.Load())
	}
}
