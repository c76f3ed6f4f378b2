package resp

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/strata-db/strata/test/integration"
)

// startOwnNode starts a strata node for a test that changes users or
// listeners (the shared node must keep its default user).
func startOwnNode(t *testing.T, args ...string) *integration.Node {
	t.Helper()
	strataOnly(t)
	n := integration.StartNodeWith(t, "", args)
	if slices.Contains(args, "--require-secure-transport") {
		return n // refuses the plaintext PING
	}
	if err := waitRESP(n.RESPAddr, 15*time.Second); err != nil {
		t.Fatalf("RESP address %s does not answer: %v", n.RESPAddr, err)
	}
	return n
}

// rcli runs redis-cli against addr and returns its trimmed output.
func rcli(t *testing.T, addr string, args ...string) string {
	t.Helper()
	return strings.TrimSpace(cli(t, addr, "", append([]string{"--no-auth-warning"}, args...)...))
}

// TestACLUsers creates ACL users with go-redis and redis-cli, logs in as
// them, checks that commands and keys outside their rules are refused
// with Redis's errors, and that the users survive a restart (they are
// stored in the cluster, not in the process).
func TestACLUsers(t *testing.T) {
	n := startOwnNode(t)
	ctx := context.Background()
	admin := newClientOpts(t, &redis.Options{Addr: n.RESPAddr, Protocol: 3})
	noErr(t, admin.Do(ctx, "ACL", "SETUSER", "app", "on", ">s3cret", "~app:*", "%R~shared:*", "+@read", "+@write", "+@connection", "+acl|whoami", "-flushall"))
	noErr(t, admin.Set(ctx, "shared:1", "s", 0))

	app := newClientOpts(t, &redis.Options{Addr: n.RESPAddr, Protocol: 3, Username: "app", Password: "s3cret"})
	eq(t, app.Do(ctx, "ACL", "WHOAMI"), any("app"))
	noErr(t, app.Set(ctx, "app:1", "v", 0))
	eq(t, app.Get(ctx, "app:1"), "v")
	eq(t, app.Get(ctx, "shared:1"), "s")
	isErr(t, app.Set(ctx, "shared:1", "x", 0), "NOPERM this user has no permissions to access one of the keys used as arguments")
	isErr(t, app.Set(ctx, "other", "x", 0), "NOPERM this user has no permissions to access one of the keys used as arguments")
	isErr(t, app.FlushAll(ctx), "NOPERM this user has no permissions to run the 'flushall' command")
	isErr(t, app.Do(ctx, "ACL", "LIST"), "NOPERM this user has no permissions to run the 'acl|list' command")

	bad := newClientOpts(t, &redis.Options{Addr: n.RESPAddr, Username: "app", Password: "wrong"})
	isErr(t, bad.Ping(ctx), "WRONGPASS invalid username-password pair or user is disabled.")

	// redis-cli: ACL SETUSER, then a login as the new user.
	if out := rcli(t, n.RESPAddr, "ACL", "SETUSER", "ro", "on", ">ropw", "allkeys", "+@read", "+@connection"); out != "OK" {
		t.Fatalf("ACL SETUSER: %q", out)
	}
	if out := rcli(t, n.RESPAddr, "--user", "ro", "--pass", "ropw", "GET", "app:1"); out != "v" {
		t.Fatalf("GET as ro: %q", out)
	}
	if out := rcli(t, n.RESPAddr, "--user", "ro", "--pass", "ropw", "SET", "app:1", "x"); !strings.Contains(out, "NOPERM this user has no permissions to run the 'set' command") {
		t.Fatalf("SET as ro: %q", out)
	}
	list := rcli(t, n.RESPAddr, "ACL", "LIST")
	if !strings.Contains(list, "user app on #$pbkdf2-sha256$") || strings.Contains(list, "s3cret") {
		t.Fatalf("ACL LIST should show salted hashes only:\n%s", list)
	}

	// The default user gets a password: new connections must AUTH.
	noErr(t, admin.Do(ctx, "ACL", "SETUSER", "default", ">defpw"))
	anon := newClientOpts(t, &redis.Options{Addr: n.RESPAddr, Protocol: 2})
	isErr(t, anon.Get(ctx, "app:1"), "NOAUTH Authentication required.")

	n.Stop()
	n.Start()
	if err := waitRESPAuth(n.RESPAddr, "defpw", 15*time.Second); err != nil {
		t.Fatal(err)
	}
	app2 := newClientOpts(t, &redis.Options{Addr: n.RESPAddr, Username: "app", Password: "s3cret"})
	eq(t, app2.Get(ctx, "app:1"), "v")
	isErr(t, app2.Set(ctx, "other", "x", 0), "NOPERM this user has no permissions to access one of the keys used as arguments")
	admin2 := newClientOpts(t, &redis.Options{Addr: n.RESPAddr, Password: "defpw"})
	eq(t, admin2.Do(ctx, "ACL", "DELUSER", "app", "ro"), any(int64(2)))
	isErr(t, app2.Get(ctx, "app:1"), "EOF") // its connection is closed
}

// TestACLSelectorsAndLog: a selector set with go-redis widens a user's
// rules, refusals land in ACL LOG, which go-redis parses and redis-cli
// prints, and ACL DRYRUN answers without running anything.
func TestACLSelectorsAndLog(t *testing.T) {
	n := startOwnNode(t)
	ctx := context.Background()
	admin := newClientOpts(t, &redis.Options{Addr: n.RESPAddr, Protocol: 3})
	noErr(t, admin.Do(ctx, "ACL", "SETUSER", "svc", "on", ">pw", "~svc:*", "+@read", "+@connection", "(~cache:* +set +get)", "(%R~conf:* +get)"))
	noErr(t, admin.Set(ctx, "conf:1", "c", 0))

	svc := newClientOpts(t, &redis.Options{Addr: n.RESPAddr, Protocol: 3, Username: "svc", Password: "pw"})
	noErr(t, svc.Set(ctx, "cache:1", "x", 0))
	eq(t, svc.Get(ctx, "cache:1"), "x")
	eq(t, svc.Get(ctx, "conf:1"), "c")
	isErr(t, svc.Set(ctx, "conf:1", "y", 0), "NOPERM this user has no permissions to access one of the keys used as arguments")
	isErr(t, svc.Del(ctx, "cache:1"), "NOPERM this user has no permissions to run the 'del' command")
	bad := newClientOpts(t, &redis.Options{Addr: n.RESPAddr, Username: "svc", Password: "wrong"})
	isErr(t, bad.Ping(ctx), "WRONGPASS invalid username-password pair or user is disabled.")

	entries, err := admin.ACLLog(ctx, 10).Result()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Reason+" "+e.Context+" "+e.Object+" "+e.Username)
	}
	want := []string{"auth toplevel AUTH svc", "command toplevel del svc", "key toplevel conf:1 svc"}
	if !slices.Equal(got, want) {
		t.Fatalf("ACL LOG: %q, want %q", got, want)
	}
	if e := entries[2]; e.Count != 1 || e.ClientInfo == nil || e.ClientInfo.User != "svc" || e.TimestampCreated == 0 {
		t.Fatalf("ACL LOG entry: %+v (client %+v)", e, e.ClientInfo)
	}
	if out := rcli(t, n.RESPAddr, "ACL", "LOG", "1"); !strings.Contains(out, "auth") || !strings.Contains(out, "client-info") {
		t.Fatalf("redis-cli ACL LOG 1: %q", out)
	}
	eq(t, admin.Do(ctx, "ACL", "DRYRUN", "svc", "set", "cache:2", "v"), any("OK"))
	eq(t, admin.Do(ctx, "ACL", "DRYRUN", "svc", "set", "conf:2", "v"), any("This user has no permissions to access the 'conf:2' key"))
	if n, err := admin.Exists(ctx, "cache:2").Result(); err != nil || n != 0 {
		t.Fatalf("DRYRUN ran the command: %d, %v", n, err)
	}
	noErr(t, admin.Do(ctx, "ACL", "LOG", "RESET"))
	if entries, err := admin.ACLLog(ctx, 10).Result(); err != nil || len(entries) != 0 {
		t.Fatalf("after RESET: %v, %v", entries, err)
	}
}

func waitRESPAuth(addr, password string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := pingOnce(addr, password)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestTLS connects over TLS to the Redis port with go-redis and redis-cli
// --tls, verified against the certificate the node generated; plaintext
// is still served on the same port unless --require-secure-transport.
func TestTLS(t *testing.T) {
	n := startOwnNode(t)
	caFile := filepath.Join(n.DataDir, "tls", "server.crt")
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	ctx := context.Background()
	c := newClientOpts(t, &redis.Options{Addr: n.RESPAddr, Protocol: 3,
		TLSConfig: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}})
	noErr(t, c.Set(ctx, "k", "over tls", 0))
	eq(t, c.Get(ctx, "k"), "over tls")

	if out := rcli(t, n.RESPAddr, "--tls", "--cacert", caFile, "GET", "k"); out != "over tls" {
		t.Fatalf("redis-cli --tls: %q", out)
	}
	plain := newClientOpts(t, &redis.Options{Addr: n.RESPAddr})
	eq(t, plain.Get(ctx, "k"), "over tls")

	// A client that does not trust the certificate fails the handshake.
	untrusted := newClientOpts(t, &redis.Options{Addr: n.RESPAddr, TLSConfig: &tls.Config{ServerName: "127.0.0.1"}})
	if err := untrusted.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("untrusted certificate: %v", err)
	}

	strict := startOwnNode(t, "--require-secure-transport")
	if err := redis.NewClient(&redis.Options{Addr: strict.RESPAddr, MaxRetries: -1}).Ping(ctx).Err(); err == nil {
		t.Fatal("plaintext accepted with --require-secure-transport")
	}
	pem2, _ := os.ReadFile(filepath.Join(strict.DataDir, "tls", "server.crt"))
	pool2 := x509.NewCertPool()
	pool2.AppendCertsFromPEM(pem2)
	sc := newClientOpts(t, &redis.Options{Addr: strict.RESPAddr, TLSConfig: &tls.Config{RootCAs: pool2, ServerName: "127.0.0.1"}})
	noErr(t, sc.Ping(ctx))
}
