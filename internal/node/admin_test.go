package node

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"syscall"
	"testing"
	"time"

	"github.com/strata-db/strata/internal/kv"
	"github.com/strata-db/strata/internal/pd"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startTestNode starts a node on dir serving HTTP on httpAddr; with
// httpAddr "" on a free port, trying another when some other process takes
// the port first. It returns the node and its HTTP address.
func startTestNode(t *testing.T, dir, httpAddr string) (*Node, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for attempt := 1; ; attempt++ {
		addr := httpAddr
		if addr == "" {
			addr = freeAddr(t)
		}
		n, err := Start(ctx, Config{DataDir: dir, HTTPAddr: addr, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err == nil {
			return n, addr
		}
		if httpAddr != "" || attempt == 5 || !errors.Is(err, syscall.EADDRINUSE) {
			t.Fatal(err)
		}
	}
}

func httpJSON(t *testing.T, method, u string, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if out != nil && resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(body, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, u, err, body)
		}
	}
	return resp.StatusCode
}

func dataRegions(t *testing.T, base string) []regionJSON {
	t.Helper()
	var all []regionJSON
	if code := httpJSON(t, "GET", base+"/admin/regions", &all); code != http.StatusOK {
		t.Fatalf("GET /admin/regions: %d", code)
	}
	var out []regionJSON
	for _, r := range all {
		if r.System {
			if r.ID != pd.SystemRegionID {
				t.Fatalf("region %d marked system", r.ID)
			}
			continue
		}
		out = append(out, r)
	}
	return out
}

func commit(t *testing.T, n *Node, kvs map[string]string) {
	t.Helper()
	ctx := context.Background()
	txn, err := n.Storage().Begin(ctx, kv.TxnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range kvs {
		_ = txn.Set([]byte(k), []byte(v))
	}
	if err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, n *Node, key string) string {
	t.Helper()
	ctx := context.Background()
	txn, err := n.Storage().Begin(ctx, kv.TxnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v, err := txn.Get(ctx, []byte(key))
	if errors.Is(err, kv.ErrNotFound) {
		return "<none>"
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(v)
}

// An operator splits the data region through the HTTP admin endpoint; the
// regions show in /admin/regions with their epochs and leader, bad keys
// are refused with 400, data stays readable and writable across both
// regions, and the layout survives a restart.
func TestAdminSplitOverHTTP(t *testing.T) {
	dir := t.TempDir()
	n, addr := startTestNode(t, dir, "")
	base := "http://" + addr
	defer func() { n.Close() }()
	commit(t, n, map[string]string{"acct/a": "1", "acct/z": "2"})

	before := dataRegions(t, base)
	if len(before) != 1 || before[0].StartKey != "" || before[0].EndKey != "" || before[0].Epoch.Version != 1 {
		t.Fatalf("before any split: %+v", before)
	}

	var res map[string]regionJSON
	if code := httpJSON(t, "POST", base+"/admin/split?key="+url.QueryEscape("acct/m"), &res); code != http.StatusOK {
		t.Fatalf("split: %d", code)
	}
	left, right := res["left"], res["right"]
	if left.ID != before[0].ID || left.StartKey != "" || left.EndKey != url.QueryEscape("acct/m") || left.Epoch.Version != 2 {
		t.Fatalf("left = %+v", left)
	}
	if right.ID <= pd.ReservedIDs || right.StartKey != url.QueryEscape("acct/m") || right.EndKey != "" || right.Epoch.Version != 2 || right.LeaderStore != firstStoreID {
		t.Fatalf("right = %+v", right)
	}

	// A key that is already a boundary, a missing key, an empty key, and
	// the wrong method.
	for _, u := range []string{"/admin/split?key=" + url.QueryEscape("acct/m"), "/admin/split", "/admin/split?key="} {
		if code := httpJSON(t, "POST", base+u, nil); code != http.StatusBadRequest {
			t.Fatalf("POST %s: %d, want 400", u, code)
		}
	}
	if code := httpJSON(t, "GET", base+"/admin/split?key=x", nil); code != http.StatusMethodNotAllowed {
		t.Fatalf("GET /admin/split: %d, want 405", code)
	}
	if _, _, err := n.SplitRegion(context.Background(), []byte("acct/m")); !errors.Is(err, ErrInvalidSplitKey) {
		t.Fatalf("SplitRegion at a boundary: %v", err)
	}

	// A binary key (escaped in the query) splits the left region.
	bin := "acct/\x00\xff"
	if code := httpJSON(t, "POST", base+"/admin/split?key="+url.QueryEscape(bin), &res); code != http.StatusOK {
		t.Fatalf("binary split: %d", code)
	}
	if got, _ := url.QueryUnescape(res["right"].StartKey); got != bin || res["right"].EndKey != url.QueryEscape("acct/m") {
		t.Fatalf("binary split right = %+v", res["right"])
	}

	after := dataRegions(t, base)
	if len(after) != 3 {
		t.Fatalf("after two splits: %+v", after)
	}
	for i, r := range after {
		if r.LeaderStore != firstStoreID {
			t.Fatalf("region %d has no leader: %+v", r.ID, r)
		}
		if i > 0 && after[i-1].EndKey != r.StartKey {
			t.Fatalf("regions do not tile the keyspace: %+v", after)
		}
	}

	// Old data is served by the new regions; a transaction over all three commits.
	if read(t, n, "acct/a") != "1" || read(t, n, "acct/z") != "2" {
		t.Fatal("data lost by the split")
	}
	commit(t, n, map[string]string{"acct/a": "10", "acct/\x00\xff\x01": "11", "acct/z": "20"})

	n.Close()
	n, _ = startTestNode(t, dir, addr)
	if got := dataRegions(t, base); len(got) != 3 || got[0].Epoch.Version != 3 || got[2].ID != right.ID {
		t.Fatalf("after restart: %+v", got)
	}
	if read(t, n, "acct/a") != "10" || read(t, n, "acct/\x00\xff\x01") != "11" || read(t, n, "acct/z") != "20" {
		t.Fatal("data lost across restart")
	}
	// PD's allocator hands out fresh ids after a restart too.
	if _, right2, err := n.SplitRegion(context.Background(), []byte("acct/q")); err != nil || right2.Id <= right.ID {
		t.Fatalf("split after restart: %v %v (ids must stay fresh across restarts)", right2, err)
	}
}
