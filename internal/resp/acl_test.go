package resp

import (
	"strings"
	"testing"
	"time"

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
