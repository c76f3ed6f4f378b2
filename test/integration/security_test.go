package integration

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/strata-db/strata/internal/certs"
	"github.com/strata-db/strata/kvpb"
)

// dsnTLS is a DSN for user over TLS config name tlsName ("" plaintext).
func (n *Node) dsnTLS(user, password, tlsName string) string {
	cfg, err := mysql.ParseDSN(n.DSNAs(user, password, ""))
	if err != nil {
		panic(err)
	}
	cfg.TLSConfig = tlsName
	if tlsName == "" {
		cfg.TLSConfig = "false"
	}
	return cfg.FormatDSN()
}

func login(dsn string) (string, error) {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return "", err
	}
	defer db.Close()
	var who string
	err = db.QueryRow("SELECT CURRENT_USER()").Scan(&who)
	return who, err
}

// registerNodeCA trusts the node's self-signed certificate for the driver.
func registerNodeCA(t *testing.T, n *Node) string {
	pem, err := os.ReadFile(filepath.Join(n.DataDir, "tls", "server.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	name := "strata-" + filepath.Base(filepath.Dir(n.DataDir)) + "-" + t.Name()
	if err := mysql.RegisterTLSConfig(name, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	return name
}

// TestLoginPlugins logs in with both password plugins over plaintext and
// TLS with go-sql-driver: caching_sha2_password's first plaintext login
// takes the RSA path (nothing cached yet), later ones the fast path; TLS
// is verified against the certificate the node generated.
func TestLoginPlugins(t *testing.T) {
	n := StartNode(t)
	root := n.DB(t, "")
	mustExec(t, root, "CREATE USER sha IDENTIFIED BY 'sha-pw'")
	mustExec(t, root, "CREATE USER nat IDENTIFIED WITH mysql_native_password BY 'nat-pw'")
	verified := registerNodeCA(t, n)
	for _, mode := range []string{"", "skip-verify", verified, ""} {
		for _, u := range []struct{ user, pw string }{{"sha", "sha-pw"}, {"nat", "nat-pw"}} {
			who, err := login(n.dsnTLS(u.user, u.pw, mode))
			if err != nil || who != u.user+"@%" {
				t.Fatalf("tls=%q %s: %q %v", mode, u.user, who, err)
			}
			_, err = login(n.dsnTLS(u.user, "wrong", mode))
			expectError(t, err, 1045, "28000")
		}
	}
	// tls=true verifies against the system roots, which do not hold the
	// self-signed certificate.
	_, err := login(n.dsnTLS("sha", "sha-pw", "true"))
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("tls=true against a self-signed certificate: %v", err)
	}
	var cipher, name string
	db, _ := sql.Open("mysql", n.dsnTLS("sha", "sha-pw", verified))
	defer db.Close()
	if err := db.QueryRow("SHOW STATUS LIKE 'Ssl_cipher'").Scan(&name, &cipher); err != nil || cipher == "" {
		t.Fatalf("Ssl_cipher over TLS: %q %v", cipher, err)
	}
}

// TestMySQLCLITLS runs the mysql CLI (MariaDB's in Debian) with --ssl and
// CA verification, and without TLS for a mysql_native_password account.
func TestMySQLCLITLS(t *testing.T) {
	client, err := exec.LookPath("mysql")
	if err != nil {
		t.Skip("mysql client not installed (scripts/test.sh installs it)")
	}
	n := StartNode(t)
	mustExec(t, n.DB(t, ""), "CREATE USER cli IDENTIFIED WITH mysql_native_password BY 'cli-pw'")
	mustExec(t, n.DB(t, ""), "CREATE USER cli2 IDENTIFIED BY 'cli2-pw'")
	host, port, _ := strings.Cut(n.SQLAddr, ":")
	run := func(args ...string) string {
		out, err := exec.Command(client, append([]string{"-h", host, "-P", port, "-N", "-B"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("mysql %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	ca := filepath.Join(n.DataDir, "tls", "server.crt")
	for _, u := range []string{"-ucli", "-ucli2"} {
		pw := "-pcli-pw"
		if u == "-ucli2" {
			pw = "-pcli2-pw"
		}
		out := run(u, pw, "--ssl", "--ssl-verify-server-cert", "--ssl-ca="+ca, "-e", "SHOW STATUS LIKE 'Ssl_cipher'")
		if !strings.HasPrefix(out, "Ssl_cipher\tTLS_") {
			t.Fatalf("Ssl_cipher over --ssl: %q", out)
		}
	}
	if out := run("-ucli", "-pcli-pw", "--skip-ssl", "-e", "SHOW STATUS LIKE 'Ssl_cipher'"); out != "Ssl_cipher" {
		t.Fatalf("Ssl_cipher without TLS: %q", out)
	}
}

// TestAccountRules: privileges over the wire, REQUIRE SSL, lockout after
// failed logins, and require_secure_transport.
func TestAccountRules(t *testing.T) {
	n := StartNode(t)
	root := n.DB(t, "")
	mustExec(t, root, "CREATE DATABASE sec")
	mustExec(t, root, "CREATE TABLE sec.t (id INT PRIMARY KEY)")
	mustExec(t, root, "CREATE USER ro IDENTIFIED BY 'ro-pw' FAILED_LOGIN_ATTEMPTS 3 PASSWORD_LOCK_TIME 1")
	mustExec(t, root, "GRANT SELECT ON sec.* TO ro")
	mustExec(t, root, "CREATE USER ssl_only IDENTIFIED BY 'x' REQUIRE SSL")

	db, _ := sql.Open("mysql", n.dsnTLS("ro", "ro-pw", ""))
	defer db.Close()
	if _, err := db.Exec("SELECT * FROM sec.t"); err != nil {
		t.Fatal(err)
	}
	_, err := db.Exec("INSERT INTO sec.t VALUES (1)")
	expectError(t, err, 1142, "42000")

	_, err = login(n.dsnTLS("ssl_only", "x", ""))
	expectError(t, err, 1045, "28000")
	if _, err := login(n.dsnTLS("ssl_only", "x", "skip-verify")); err != nil {
		t.Fatalf("REQUIRE SSL over TLS: %v", err)
	}

	for i := 0; i < 3; i++ {
		_, err := login(n.dsnTLS("ro", "bad", "skip-verify"))
		expectError(t, err, 1045, "28000")
	}
	_, err = login(n.dsnTLS("ro", "ro-pw", "skip-verify"))
	expectError(t, err, 3955, "28000")
	mustExec(t, root, "ALTER USER ro ACCOUNT UNLOCK")
	if _, err := login(n.dsnTLS("ro", "ro-pw", "skip-verify")); err != nil {
		t.Fatalf("after ACCOUNT UNLOCK: %v", err)
	}
	resp, err := http.Get("http://" + n.HTTPAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `strata_mysql_login_failures_total{reason="wrong_password"}`) ||
		!strings.Contains(string(body), `strata_mysql_login_failures_total{reason="blocked_after_failures"}`) {
		t.Fatalf("login failures are not counted in /metrics")
	}

	strict := StartNodeWith(t, "", []string{"--require-secure-transport"})
	_, err = login(strict.dsnTLS("root", "", ""))
	expectError(t, err, 3159, "HY000")
	if _, err := login(strict.dsnTLS("root", "", "skip-verify")); err != nil {
		t.Fatalf("TLS login with require_secure_transport: %v", err)
	}
}

// TestSecureDefaults: a node refuses to listen beyond loopback without
// certificates or --insecure, and then guards /admin/ and /debug/ with
// the SQL accounts.
func TestSecureDefaults(t *testing.T) {
	dir := t.TempDir()
	out, err := exec.Command(Binary(t), "start", "--data-dir", filepath.Join(dir, "d"), "--sql-addr", "0.0.0.0:0",
		"--resp-addr", "", "--http-addr", "", "--grpc-addr", "").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "beyond loopback without certificates") {
		t.Fatalf("start on 0.0.0.0 without certificates: %v\n%s", err, out)
	}

	n := StartNodeWith(t, "", nil)
	n.Kill()
	_, port, _ := strings.Cut(n.HTTPAddr, ":")
	n.HTTPAddr = "0.0.0.0:" + port
	n.ExtraArgs = []string{"--insecure", "--http-addr", n.HTTPAddr}
	n.Start()
	mustExec(t, n.DB(t, ""), "CREATE USER ops IDENTIFIED BY 'ops-pw'")
	mustExec(t, n.DB(t, ""), "GRANT SUPER ON *.* TO ops")
	mustExec(t, n.DB(t, ""), "CREATE USER peon IDENTIFIED BY 'peon-pw'")
	// Beyond loopback the HTTP port speaks only HTTPS, with the node's
	// (here self-signed) certificate.
	caFile := filepath.Join(n.DataDir, "tls", "server.crt")
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	cl := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	if resp, err := http.Get("http://127.0.0.1:" + port + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("plain HTTP beyond loopback answered %s", resp.Status)
		}
	}
	get := func(path, user, pw string) int {
		req, _ := http.NewRequest("GET", "https://127.0.0.1:"+port+path, nil)
		if user != "" {
			req.SetBasicAuth(user, pw)
		}
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		path, user, pw string
		want           int
	}{
		{"/healthz", "", "", 200},
		{"/debug/pprof/", "", "", 401},
		{"/admin/regions", "", "", 401},
		{"/admin/regions", "ops", "wrong", 401},
		{"/admin/regions", "peon", "peon-pw", 401},
		{"/admin/regions", "ops", "ops-pw", 200},
		{"/debug/pprof/", "ops", "ops-pw", 200},
	} {
		if got := get(c.path, c.user, c.pw); got != c.want {
			t.Errorf("GET %s as %q: %d, want %d", c.path, c.user, got, c.want)
		}
	}

	// strata status over HTTPS: verified with --ca-cert, or not with
	// --insecure-skip-verify; refused without either.
	status := func(args ...string) (string, error) {
		out, err := exec.Command(Binary(t), append([]string{"status", "--host", "127.0.0.1:" + port}, args...)...).CombinedOutput()
		return string(out), err
	}
	for _, args := range [][]string{{"--ca-cert", caFile}, {"--insecure-skip-verify"}} {
		if out, err := status(args...); err != nil || !strings.Contains(out, "placement driver leader") {
			t.Errorf("strata status %v: %v\n%s", args, err, out)
		}
	}
	if out, err := status(); err == nil || !strings.Contains(out, "--insecure-skip-verify") {
		t.Errorf("strata status without a CA: %v\n%s", err, out)
	}
	// A node on loopback still answers plain HTTP, and status finds it.
	m := StartNode(t)
	if out, err := exec.Command(Binary(t), "status", "--host", m.HTTPAddr).CombinedOutput(); err != nil {
		t.Errorf("strata status on loopback: %v\n%s", err, out)
	}
}

// TestMutualTLSCluster: two nodes with certificates of one CA form a
// cluster; a client with another CA's certificate, or none, cannot call
// PD on a node.
func TestMutualTLSCluster(t *testing.T) {
	dir := t.TempDir()
	ca, nodeCerts := filepath.Join(dir, "ca"), filepath.Join(dir, "certs")
	bin := Binary(t)
	for _, args := range [][]string{
		{"cert", "create-ca", "--ca-key-dir", ca},
		{"cert", "create-node", "--ca-key-dir", ca, "--certs-dir", nodeCerts, "127.0.0.1", "localhost"},
	} {
		if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
			t.Fatalf("strata %v: %v\n%s", args, err, out)
		}
	}
	c := StartCluster(t, 2, "--certs-dir", nodeCerts)
	mustExec(t, c.Nodes[1].DB(t, ""), "CREATE DATABASE overtls")

	call := func(opt grpc.DialOption) error {
		conn, err := grpc.NewClient(c.Nodes[0].GRPCAddr, opt)
		if err != nil {
			return err
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err = kvpb.NewPDClient(conn).ClusterStatus(ctx, &kvpb.ClusterStatusRequest{})
		return err
	}
	if err := call(grpc.WithTransportCredentials(insecure.NewCredentials())); err == nil {
		t.Fatal("a plaintext client called PD")
	}
	foreign := filepath.Join(dir, "foreign")
	if err := certs.CreateCA(filepath.Join(foreign, "ca")); err != nil {
		t.Fatal(err)
	}
	if err := certs.CreateNode(foreign, filepath.Join(foreign, "ca"), []string{"127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	_, fcli, err := certs.MutualTLS(foreign)
	if err != nil {
		t.Fatal(err)
	}
	// Trust the real cluster's CA so that only the client side is wrong.
	_, good, err := certs.MutualTLS(nodeCerts)
	if err != nil {
		t.Fatal(err)
	}
	fcli.RootCAs = good.RootCAs
	if err := call(grpc.WithTransportCredentials(credentials.NewTLS(fcli))); err == nil {
		t.Fatal("a client with another CA's certificate called PD")
	}
	if err := call(grpc.WithTransportCredentials(credentials.NewTLS(good))); err != nil {
		t.Fatalf("a client with the cluster's certificate: %v", err)
	}
}

// TestAuditLog: with --audit-log, logins (MySQL and Redis, refused and
// accepted) and DDL/DCL statements (with their outcome and error code)
// are JSON lines in the file, passwords never.
func TestAuditLog(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "audit.log")
	n := StartNodeWith(t, "", []string{"--audit-log", logPath})
	db := n.DB(t, "")
	mustExec(t, db, "CREATE USER auditee IDENTIFIED BY 'very-secret-pw'")
	mustExec(t, db, "GRANT SELECT ON *.* TO auditee")
	mustExec(t, db, "CREATE DATABASE adb")
	mustExec(t, db, "CREATE TABLE adb.t (id INT PRIMARY KEY)")
	if _, err := db.Exec("CREATE TABLE adb.t (id INT PRIMARY KEY)"); err == nil {
		t.Fatal("second CREATE TABLE succeeded")
	}
	mustExec(t, db, "INSERT INTO adb.t VALUES (1)") // DML: not audited
	if _, err := login(n.dsnTLS("auditee", "wrong", "")); err == nil {
		t.Fatal("wrong password accepted")
	}
	if _, err := login(n.dsnTLS("auditee", "very-secret-pw", "")); err != nil {
		t.Fatal(err)
	}
	rc, err := net.Dial("tcp", n.RESPAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	br := bufio.NewReader(rc)
	for _, cmd := range []string{"ACL SETUSER rusr on >redis-secret-pw ~* +@all", "AUTH rusr nope", "AUTH rusr redis-secret-pw"} {
		fmt.Fprintf(rc, "%s\r\n", cmd)
		if _, err := br.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
	}
	type event struct {
		Event, Protocol, User, Host, Class, Digest, Statement, Outcome, Reason string
		ErrorCode                                                              int    `json:"error_code"`
		ConnID                                                                 uint64 `json:"connection_id"`
	}
	var events []event
	deadline := time.Now().Add(5 * time.Second)
	for {
		raw, err := os.ReadFile(logPath)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(raw), "very-secret-pw") || strings.Contains(string(raw), "redis-secret-pw") {
			t.Fatalf("a password reached the audit log:\n%s", raw)
		}
		events = events[:0]
		for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
			var e event
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				t.Fatalf("not a JSON line: %q", line)
			}
			events = append(events, e)
		}
		if len(events) >= 11 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	has := func(what string, f func(e event) bool) {
		t.Helper()
		for _, e := range events {
			if f(e) {
				return
			}
		}
		t.Errorf("no audit event for %s in %+v", what, events)
	}
	has("CREATE USER", func(e event) bool {
		return e.Class == "dcl" && strings.HasPrefix(e.Statement, "create user") && e.Outcome == "success" && e.User == "root" && len(e.Digest) == 64
	})
	has("GRANT", func(e event) bool { return e.Class == "dcl" && strings.HasPrefix(e.Statement, "grant select") })
	has("CREATE TABLE", func(e event) bool {
		return e.Class == "ddl" && strings.Contains(e.Statement, "create table") && e.Outcome == "success"
	})
	has("failed CREATE TABLE", func(e event) bool { return e.Class == "ddl" && e.Outcome == "failure" && e.ErrorCode == 1050 })
	has("refused login", func(e event) bool {
		return e.Event == "login" && e.Protocol == "mysql" && e.User == "auditee" && e.Outcome == "failure" && e.ErrorCode == 1045 && e.Host == "127.0.0.1"
	})
	has("login", func(e event) bool {
		return e.Event == "login" && e.Protocol == "mysql" && e.User == "auditee" && e.Outcome == "success" && e.ConnID > 0
	})
	has("ACL SETUSER", func(e event) bool {
		return e.Protocol == "redis" && e.Class == "dcl" && e.Statement == "ACL SETUSER rusr on >? ~* +@all"
	})
	has("refused AUTH", func(e event) bool { return e.Protocol == "redis" && e.Event == "login" && e.Outcome == "failure" })
	has("AUTH", func(e event) bool {
		return e.Protocol == "redis" && e.Event == "login" && e.User == "rusr" && e.Outcome == "success"
	})
	for _, e := range events {
		if strings.Contains(e.Statement, "insert") {
			t.Errorf("DML audited: %+v", e)
		}
	}
}

// TestLoginFailureDelay: after 3 wrong passwords in a row, further
// attempts of that user from that address wait (one step more per
// failure) on the MySQL and Redis ports, other users do not, a right
// password ends it, and failures are counted in the metrics.
func TestLoginFailureDelay(t *testing.T) {
	const step = 300 * time.Millisecond
	n := StartNodeWith(t, "", []string{"--login-failure-delay", step.String()})
	mustExec(t, n.DB(t, ""), "CREATE USER guessed IDENTIFIED BY 'right-pw'", "CREATE USER other IDENTIFIED BY 'other-pw'")
	timed := func(user, pw string) (time.Duration, error) {
		start := time.Now()
		_, err := login(n.dsnTLS(user, pw, ""))
		return time.Since(start), err
	}
	for i := 1; i <= 5; i++ {
		d, err := timed("guessed", "wrong")
		if err == nil {
			t.Fatal("wrong password accepted")
		}
		if want := time.Duration(max(0, i-3)) * step; d < want || (want == 0 && d > step) {
			t.Errorf("wrong login %d took %v, want about %v", i, d, want)
		}
	}
	if d, err := timed("other", "other-pw"); err != nil || d > step {
		t.Errorf("another user's login: %v after %v", err, d)
	}
	if d, err := timed("guessed", "right-pw"); err != nil || d < 3*step {
		t.Errorf("right password after 5 failures: %v after %v (want it delayed, then accepted)", err, d)
	}
	if d, err := timed("guessed", "wrong"); err == nil || d > step {
		t.Errorf("a wrong password after a success: %v after %v (want no delay)", err, d)
	}

	rc, err := net.Dial("tcp", n.RESPAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	br := bufio.NewReader(rc)
	send := func(cmd string) (string, time.Duration) {
		start := time.Now()
		fmt.Fprintf(rc, "%s\r\n", cmd)
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(line), time.Since(start)
	}
	send("ACL SETUSER ruser on >rpw ~* +@all")
	var last time.Duration
	for i := 1; i <= 4; i++ {
		reply, d := send("AUTH ruser nope")
		if !strings.HasPrefix(reply, "-WRONGPASS") {
			t.Fatalf("AUTH with a wrong password: %q", reply)
		}
		last = d
	}
	if last < step {
		t.Errorf("4th wrong AUTH took %v, want at least %v", last, step)
	}

	resp, err := http.Get("http://" + n.HTTPAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`strata_mysql_login_failures_total{reason="wrong_password"} 6`,
		`strata_login_delays_total{protocol="mysql"} 3`, `strata_login_delays_total{protocol="redis"} 1`,
		"strata_resp_auth_failures_total 4"} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}
