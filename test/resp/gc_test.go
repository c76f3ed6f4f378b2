package resp

import (
	"bufio"
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/strata-db/strata/test/integration"
)

// TestOverwrittenVersionsAreCollected: a hot key's old versions do not pile
// up forever. With a short GC life time, a key incremented many times is
// collected down (strata_gc_versions_deleted_total grows) and its value is
// intact.
func TestOverwrittenVersionsAreCollected(t *testing.T) {
	strataOnly(t)
	n := integration.StartNodeWith(t, "", []string{"--gc-interval", "500ms", "--gc-life-time", "1s"})
	c := redis.NewClient(&redis.Options{Addr: n.RESPAddr, Protocol: 2})
	defer c.Close()
	ctx := context.Background()
	for i := 0; i < 300; i++ {
		if err := c.Incr(ctx, "hot").Err(); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		deleted := metric(t, n.HTTPAddr, "strata_gc_versions_deleted_total")
		if deleted >= 299 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("strata_gc_versions_deleted_total = %v after 20 s, want >= 299", deleted)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if v, err := c.Get(ctx, "hot").Int(); err != nil || v != 300 {
		t.Fatalf("GET hot = %d, %v after GC, want 300", v, err)
	}
	if v, err := c.Incr(ctx, "hot").Result(); err != nil || v != 301 {
		t.Fatalf("INCR hot = %d, %v after GC, want 301", v, err)
	}
}

// metric reads one Prometheus sample from the node's /metrics.
func metric(t *testing.T, httpAddr, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	return 0
}
