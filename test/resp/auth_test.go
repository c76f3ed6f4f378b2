package resp

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/redis/go-redis/v9"

	"github.com/strata-db/strata/test/integration"
)

const testPassword = "pw"

// passwordTarget returns the address of a server that requires
// testPassword: a strata node of its own started with --resp-password, or
// the shared Redis with requirepass set until the test ends.
func passwordTarget(t *testing.T) string {
	t.Helper()
	if !compatRedis() {
		n := integration.StartNodeWith(t, "", []string{"--resp-password", testPassword})
		deadline := time.Now().Add(15 * time.Second)
		for {
			err := pingOnce(n.RESPAddr, testPassword)
			if err == nil {
				return n.RESPAddr
			}
			if time.Now().After(deadline) {
				t.Fatalf("strata with --resp-password does not answer AUTH and PING: %v", err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	addr := fresh(t).addr
	w := dialWireAddr(t, addr)
	w.expect(t, "+OK", "CONFIG", "SET", "requirepass", testPassword)
	w.close()
	t.Cleanup(func() {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Errorf("restoring requirepass: %v", err)
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		c.Write([]byte(encodeCommand("AUTH", testPassword) + encodeCommand("CONFIG", "SET", "requirepass", "")))
		buf := make([]byte, 10)
		if _, err := readFull(c, buf); err != nil || string(buf) != "+OK\r\n+OK\r\n" {
			fmt.Fprintf(os.Stderr, "restoring requirepass: %q %v\n", buf, err)
		}
	})
	return addr
}

func TestAuth(t *testing.T) {
	addr := passwordTarget(t)
	flushAll(t, addr, testPassword)
	datadriven.Walk(t, "testdata/auth", func(t *testing.T, path string) {
		runTranscriptFile(t, path, addr)
	})

	ctx := t.Context()
	for _, proto := range []int{2, 3} {
		ok := newClientOpts(t, &redis.Options{Addr: addr, Protocol: proto, Password: testPassword})
		eq(t, ok.Set(ctx, "gk", "gv", 0), "OK")
		eq(t, ok.Get(ctx, "gk"), "gv")
		eq(t, newClientOpts(t, &redis.Options{Addr: addr, Protocol: proto, Username: "default", Password: testPassword}).Get(ctx, "gk"), "gv")

		none := newClientOpts(t, &redis.Options{Addr: addr, Protocol: proto})
		isErr(t, none.Get(ctx, "gk"), "NOAUTH Authentication required.")

		wrong := newClientOpts(t, &redis.Options{Addr: addr, Protocol: proto, Password: "wrong"})
		err := wrong.Get(ctx, "gk").Err()
		var rerr redis.Error
		if err == nil || !strings.Contains(err.Error(), "WRONGPASS invalid username-password pair or user is disabled.") {
			t.Errorf("RESP%d, wrong password: %v, want WRONGPASS", proto, err)
		} else if errors.As(err, &rerr) && !strings.HasPrefix(rerr.Error(), "WRONGPASS") {
			t.Errorf("RESP%d, wrong password: %v", proto, err)
		}
	}

	// redis-cli with -a authenticates before running the command.
	if _, err := exec.LookPath("redis-cli"); err == nil {
		wantOutput(t, "redis-cli -a", cli(t, addr, "", "-a", testPassword, "--no-auth-warning", "GET", "gk"), "gv\n")
		wantOutput(t, "redis-cli without -a", cli(t, addr, "", "GET", "gk"), "NOAUTH Authentication required.\n\n")
	}
}
