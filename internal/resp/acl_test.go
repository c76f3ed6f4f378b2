package resp

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-db/strata/internal/kv"
	"github.com/strata-db/strata/internal/kv/kvtest"
)

// TestACLPasswords covers the password rules: >pw and #<sha256> both add
// a salted hash, <pw and !<sha256> remove it, a stored hash from ACL LIST
// can be given back with #, and the clear password is never stored.
func TestACLPasswords(t *testing.T) {
	u := newACLUser("u")
	for _, r := range []string{"on", ">first", "#" + sha256Hex("second")} {
		if err := u.apply(r); err != nil {
			t.Fatal(err)
		}
	}
	if len(u.Passwords) != 2 || u.NoPass {
		t.Fatalf("passwords %v nopass %v", u.Passwords, u.NoPass)
	}
	for _, h := range u.Passwords {
		if !strings.HasPrefix(h, "$pbkdf2-sha256$") || strings.Contains(h, "first") || strings.Contains(h, sha256Hex("second")) {
			t.Fatalf("stored %q", h)
		}
	}
	cache := newAuthCache()
	c := compileACLUser(u)
	for pw, want := range map[string]bool{"first": true, "second": true, "third": false, "": false} {
		for range 2 { // the second time from the cache
			if got := cache.verify(c, []byte(pw)); got != want {
				t.Fatalf("verify %q = %v", pw, got)
			}
		}
	}
	// Round trip of a stored hash through ACL LIST's rules.
	v := newACLUser("v")
	if err := v.apply("#" + u.Passwords[0]); err != nil {
		t.Fatal(err)
	}
	if !cache.verify(compileACLUser(v), []byte("first")) {
		t.Fatal("hash from ACL LIST does not verify")
	}
	if err := u.apply("<first"); err != nil || len(u.Passwords) != 1 {
		t.Fatalf("<first: %v, %v", err, u.Passwords)
	}
	if err := u.apply("!" + sha256Hex("second")); err != nil || len(u.Passwords) != 0 {
		t.Fatalf("!second: %v, %v", err, u.Passwords)
	}
	if err := u.apply("<first"); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("removing a missing password: %v", err)
	}
	if err := u.apply("nopass"); err != nil || !compileACLUser(u).NoPass {
		t.Fatal("nopass")
	}
}

// TestACLSharedStore checks that users live in the store: a second
// gateway on the same store sees a user the first one created, within
// its poll interval, and a deletion too.
func TestACLSharedStore(t *testing.T) {
	store := kvtest.NewMemStorage()
	var srvs [2]*Server
	for i := range srvs {
		s, err := New(Config{Addr: "127.0.0.1:0"}, store)
		if err != nil {
			t.Fatal(err)
		}
		go s.Serve()
		defer s.Close()
		srvs[i] = s
	}
	a := dialTest(t, srvs[0].Addr().String())
	defer a.Close()
	send := func(c *testConn, line string) string {
		t.Helper()
		if _, err := c.Write([]byte(line + "\r\n")); err != nil {
			t.Fatal(err)
		}
		r, err := readReply(c.r, "")
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(r)
	}
	if r := send(a, "ACL SETUSER bob on >pw ~* +@all"); r != "OK" {
		t.Fatal(r)
	}
	b := dialTest(t, srvs[1].Addr().String())
	defer b.Close()
	deadline := time.Now().Add(5 * time.Second)
	for send(b, "AUTH bob pw") != "OK" {
		if time.Now().After(deadline) {
			t.Fatal("the second gateway never saw user bob")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if r := send(b, "ACL WHOAMI"); r != `"bob"` {
		t.Fatal(r)
	}
	if r := send(a, "ACL DELUSER bob"); r != "(integer) 1" {
		t.Fatal(r)
	}
	for {
		b.Write([]byte("PING\r\n"))
		if _, err := readReply(b.r, ""); err != nil {
			break // closed: bob is gone
		}
		if time.Now().After(deadline) {
			t.Fatal("bob's connection on the second gateway stayed open")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestACLLog: refused commands, keys and AUTHs are logged, newest first,
// repeats within a minute grouped into one entry, at most aclLogMaxLen
// kept, and ACL LOG RESET empties the log.
func TestACLLog(t *testing.T) {
	clock := &fakeClock{now: time.UnixMilli(1_700_000_000_000)}
	srv, err := New(Config{Addr: "127.0.0.1:0", Now: clock.Now}, kvtest.NewMemStorage())
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve()
	defer srv.Close()
	admin := dialTest(t, srv.Addr().String())
	defer admin.Close()
	u := dialTest(t, srv.Addr().String())
	defer u.Close()
	send := func(c *testConn, line string) string {
		t.Helper()
		if _, err := c.Write([]byte(line + "\r\n")); err != nil {
			t.Fatal(err)
		}
		r, err := readReply(c.r, "")
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(r)
	}
	if r := send(admin, "ACL SETUSER eve on nopass ~pub:* +get +set +multi +exec"); r != "OK" {
		t.Fatal(r)
	}
	if r := send(admin, "ACL LOG"); r != "(empty array)" {
		t.Fatalf("empty log: %s", r)
	}
	send(u, "AUTH eve x")
	send(u, "GET secret:1")
	send(u, "DEL pub:1")
	send(u, "AUTH eve2 x")
	clock.Advance(time.Second)
	send(u, "GET secret:1") // grouped with the first
	send(u, "MULTI")
	send(u, "GET secret:2")
	send(u, "EXEC")

	// Each line without its "n) " numbering, joined by |.
	flat := func(r string) string {
		var parts []string
		for _, l := range strings.Split(r, "\n") {
			l = strings.TrimSpace(l)
			for {
				f := strings.SplitN(l, ") ", 2)
				if len(f) != 2 || strings.Trim(f[0], "0123456789") != "" || f[0] == "" {
					break
				}
				l = f[1]
			}
			parts = append(parts, l)
		}
		return strings.Join(parts, "|")
	}
	log := flat(send(admin, "ACL LOG"))
	for _, want := range []string{
		// newest first: the key refused in MULTI, then the grouped one
		`"count"|(integer) 1|"reason"|"key"|"context"|"multi"|"object"|"secret:2"|"username"|"eve"|"age-seconds"|"0"`,
		`"count"|(integer) 2|"reason"|"key"|"context"|"toplevel"|"object"|"secret:1"|"username"|"eve"`,
		`"count"|(integer) 1|"reason"|"auth"|"context"|"toplevel"|"object"|"AUTH"|"username"|"eve2"|"age-seconds"|"1"`,
		`"count"|(integer) 1|"reason"|"command"|"context"|"toplevel"|"object"|"del"|"username"|"eve"`,
		`"entry-id"|(integer) 0|"timestamp-created"|(integer) 1700000000000|"timestamp-last-updated"|(integer) 1700000001000`,
		"cmd=get user=eve",
	} {
		if !strings.Contains(log, want) {
			t.Fatalf("ACL LOG lacks\n%s\nin\n%s", want, log)
		}
	}
	if i, j := strings.Index(log, `"secret:2"`), strings.Index(log, `"eve2"`); i > j {
		t.Fatalf("ACL LOG is not newest first:\n%s", log)
	}
	if r := send(admin, "ACL LOG 1"); strings.Count(r, `"count"`) != 1 {
		t.Fatalf("ACL LOG 1:\n%s", r)
	}
	if r := send(admin, "ACL LOG -1"); r != "(empty array)" {
		t.Fatal(r)
	}
	// After a minute the same refusal starts a new entry.
	clock.Advance(61 * time.Second)
	send(u, "GET secret:1")
	if r := flat(send(admin, "ACL LOG 1")); !strings.Contains(r, `"count"|(integer) 1|"reason"|"key"|"context"|"toplevel"|"object"|"secret:1"`) {
		t.Fatalf("new entry after a minute:\n%s", r)
	}
	for i := range aclLogMaxLen + 10 {
		send(u, fmt.Sprintf("GET secret:x%d", i))
	}
	if r := send(admin, fmt.Sprintf("ACL LOG %d", aclLogMaxLen+50)); strings.Count(r, `"count"`) != aclLogMaxLen {
		t.Fatalf("log keeps %d entries, want %d", strings.Count(r, `"count"`), aclLogMaxLen)
	}
	if r := send(admin, "ACL LOG RESET"); r != "OK" {
		t.Fatal(r)
	}
	if r := send(admin, "ACL LOG"); r != "(empty array)" {
		t.Fatalf("after RESET: %s", r)
	}
}

// countingStorage counts the transactions begun on a storage.
type countingStorage struct {
	kv.Storage
	begun atomic.Int64
}

func (c *countingStorage) Begin(ctx context.Context, opts kv.TxnOptions) (kv.Txn, error) {
	c.begun.Add(1)
	return c.Storage.Begin(ctx, opts)
}

// TestACLPollBacksOff: a gateway whose users do not change looks for
// changes at most every aclIdlePoll once aclHold passed, not every
// aclPoll; a change made on another gateway still takes effect within
// aclIdlePoll.
func TestACLPollBacksOff(t *testing.T) {
	oldHold, oldIdle := aclHold, aclIdlePoll
	aclHold, aclIdlePoll = 200*time.Millisecond, 400*time.Millisecond
	defer func() { aclHold, aclIdlePoll = oldHold, oldIdle }()
	store := kvtest.NewMemStorage()
	cs := &countingStorage{Storage: store}
	a, err := New(Config{Addr: "127.0.0.1:0", ReapInterval: time.Hour}, store)
	if err != nil {
		t.Fatal(err)
	}
	go a.Serve()
	defer a.Close()
	b, err := New(Config{Addr: "127.0.0.1:0", ReapInterval: time.Hour}, cs)
	if err != nil {
		t.Fatal(err)
	}
	go b.Serve()
	defer b.Close()

	time.Sleep(aclHold + 2*aclIdlePoll)
	before := cs.begun.Load()
	const window = 2 * time.Second
	time.Sleep(window)
	got := cs.begun.Load() - before
	if max := int64(window/aclIdlePoll) + 2; got > max {
		t.Fatalf("an idle gateway began %d transactions in %s, want at most %d (aclPoll %s)", got, window, max, aclPoll)
	}

	ca := dialTest(t, a.Addr().String())
	defer ca.Close()
	if _, err := ca.Write([]byte("ACL SETUSER carol on >pw ~* +@all\r\n")); err != nil {
		t.Fatal(err)
	}
	if r, err := readReply(ca.r, ""); err != nil || strings.TrimSpace(r) != "OK" {
		t.Fatal(r, err)
	}
	changed := time.Now()
	cb := dialTest(t, b.Addr().String())
	defer cb.Close()
	for {
		if _, err := cb.Write([]byte("AUTH carol pw\r\n")); err != nil {
			t.Fatal(err)
		}
		r, err := readReply(cb.r, "")
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(r) == "OK" {
			break
		}
		if time.Since(changed) > aclIdlePoll+500*time.Millisecond {
			t.Fatalf("the user made on another gateway was not usable after %s: %s", time.Since(changed), r)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
