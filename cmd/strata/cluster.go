package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"

	"github.com/strata-db/strata/internal/node"
)

// parseJoin splits and checks --join.
func parseJoin(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []string
	for _, a := range strings.Split(s, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(a); err != nil {
			return nil, fmt.Errorf("--join: %q is not host:port", a)
		}
		out = append(out, a)
	}
	return out, nil
}

// demo runs a local cluster of N nodes in this process until interrupted,
// like `cockroach demo`.
func demo(args []string) error {
	fs := flag.NewFlagSet("demo", flag.ExitOnError)
	nodes := fs.Int("nodes", 3, "number of nodes (1..9)")
	dataDir := fs.String("data-dir", "", "directory for the nodes' data (default: a new temporary directory, removed on exit)")
	sqlPort := fs.Int("sql-port", 4000, "MySQL port of the first node; node i listens on sql-port+i-1")
	respPort := fs.Int("resp-port", 6380, "Redis port of the first node")
	httpPort := fs.Int("http-port", 8080, "HTTP port of the first node")
	grpcPort := fs.Int("grpc-port", 20160, "gRPC port of the first node")
	replicas := fs.Int("replicas", 3, "replication factor")
	logLevel := fs.String("log-level", "warn", "debug, info, warn or error")
	fs.Parse(args)
	if *nodes < 1 || *nodes > 9 {
		return fmt.Errorf("--nodes must be between 1 and 9, not %d", *nodes)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("bad --log-level: %w", err)
	}
	dir := *dataDir
	if dir == "" {
		d, err := os.MkdirTemp("", "strata-demo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if err := configureGC(logger, defaultGOGC, 0); err != nil {
		return err
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	addr := func(port, i int) string { return fmt.Sprintf("127.0.0.1:%d", port+i) }
	for i := 0; i < *nodes; i++ {
		for _, a := range []string{addr(*sqlPort, i), addr(*respPort, i), addr(*httpPort, i), addr(*grpcPort, i)} {
			ln, err := net.Listen("tcp", a)
			if err != nil {
				return fmt.Errorf("%s is taken; choose other ports with --sql-port, --resp-port, --http-port and --grpc-port", a)
			}
			ln.Close()
		}
	}
	var running []*node.Node
	defer func() {
		// All at once: a node stopping after the others would spend its
		// shutdown's bounded waits (deregistering its schema lease) on a
		// cluster that has lost its quorum.
		var wg sync.WaitGroup
		for _, n := range running {
			wg.Add(1)
			go func() {
				defer wg.Done()
				n.Close()
			}()
		}
		wg.Wait()
	}()
	for i := 0; i < *nodes; i++ {
		cfg := node.Config{
			DataDir:  filepath.Join(dir, fmt.Sprintf("node%d", i+1)),
			SQLAddr:  addr(*sqlPort, i),
			RESPAddr: addr(*respPort, i),
			HTTPAddr: addr(*httpPort, i),
			GRPCAddr: addr(*grpcPort, i),
			Replicas: *replicas,
			Logger:   logger.With("node", i+1),
			Version:  Version,
		}
		if i > 0 {
			cfg.Join = []string{addr(*grpcPort, 0)}
		}
		n, err := node.Start(ctx, cfg)
		if err != nil {
			return fmt.Errorf("node %d: %w", i+1, err)
		}
		running = append(running, n)
	}
	fmt.Printf("Strata demo cluster: %d nodes, data in %s\n\n", *nodes, dir)
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "node\tMySQL\tRedis\tHTTP\tgRPC")
	for i := 0; i < *nodes; i++ {
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\n", i+1, addr(*sqlPort, i), addr(*respPort, i), addr(*httpPort, i), addr(*grpcPort, i))
	}
	w.Flush()
	fmt.Printf("\nConnect with:\n  mysql -h 127.0.0.1 -P %d -u root\n  redis-cli -p %d\n  strata status --host %s\n\nPress Ctrl-C to stop every node.\n",
		*sqlPort, *respPort, addr(*httpPort, 0))
	<-ctx.Done()
	fmt.Println("\nstopping")
	return nil
}

// status prints a cluster's state from any node's /status.
func status(args []string) error {
	fs := flag.NewFlagSet("status", flag.ExitOnError)
	host := fs.String("host", "127.0.0.1:8080", "HTTP address (--http-addr) of any node")
	format := fs.String("format", "table", "table or json")
	var hf httpFlags
	hf.register(fs)
	fs.Parse(args)
	resp, err := hf.get(*host, "/status")
	if err != nil {
		return fmt.Errorf("cannot reach %s: %v", *host, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		var e map[string]string
		if json.Unmarshal(body, &e) == nil && e["error"] != "" {
			return fmt.Errorf("%s: %s", *host, e["error"])
		}
		return fmt.Errorf("%s: %s", *host, resp.Status)
	}
	if *format == "json" {
		_, err := os.Stdout.Write(body)
		return err
	}
	var st node.StatusJSON
	if err := json.Unmarshal(body, &st); err != nil {
		return errors.New("unexpected answer from /status")
	}
	printStatus(os.Stdout, &st)
	return nil
}

func printStatus(out io.Writer, st *node.StatusJSON) {
	fmt.Fprintf(out, "cluster %s, replication factor %d, placement driver leader: node %d\n\n", st.ClusterID, st.Replicas, st.PDLeaderStore)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "node\taddress\tsql\tredis\thttp\tstate\tsince\treplicas\tleaders\tsize\tread/s\twrite/s\tqps")
	for _, n := range st.Nodes {
		state := "up"
		if !n.Up {
			state = "DOWN"
		}
		if n.State != "" && n.State != "serving" {
			state += " " + n.State
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%d\n", n.ID, n.Address, n.SQLAddress, n.RESPAddress, n.HTTPAddress,
			state, n.Since, n.Replicas, n.Leaders, humanBytes(n.RegionSize), humanBytes(n.ReadBytesPerSec),
			humanBytes(n.WriteBytesPerSec), n.ReadQPS+n.WriteQPS)
	}
	w.Flush()
	under := 0
	for _, r := range st.Regions {
		if r.UnderReplicated {
			under++
		}
	}
	fmt.Fprintf(out, "\n%d regions, %d under-replicated\n\n", len(st.Regions), under)
	sort.Slice(st.Regions, func(i, j int) bool { return st.Regions[i].ID < st.Regions[j].ID })
	w = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "region\tstart\tend\tleader\tsize\tqps\treplicas (node:role:lag)")
	for _, r := range st.Regions {
		var peers []string
		for _, p := range r.Peers {
			peers = append(peers, fmt.Sprintf("%d:%s:%d", p.Store, p.Role, p.Lag))
		}
		name := fmt.Sprint(r.ID)
		if r.System {
			name += " (system)"
		}
		if r.UnderReplicated {
			name += " (under-replicated)"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%d\t%s\n", name, r.StartKey, r.EndKey, r.LeaderStore,
			humanBytes(r.ApproximateSize), r.ReadQPS+r.WriteQPS, strings.Join(peers, " "))
	}
	w.Flush()
	if len(st.Operators) > 0 {
		fmt.Fprintf(out, "\nrecent operators:\n")
		w = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		for _, o := range st.Operators[max(0, len(st.Operators)-10):] {
			fmt.Fprintf(w, "%s\tregion %d\t%s\tnode %d\t%s\n", o.Time, o.Region, o.Kind, o.Store, o.Reason)
		}
		w.Flush()
	}
}

func humanBytes(b uint64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.1fG", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1fM", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1fK", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%dB", b)
}

// nodeCommand is `strata node drain|decommission|resume N`: it asks any
// node (--host, its HTTP address) to change node N's state in PD.
func nodeCommand(args []string) error {
	if len(args) < 1 {
		return errors.New("usage: strata node drain|decommission|resume <node id> [--host H]")
	}
	action := args[0]
	switch action {
	case "drain", "decommission", "resume":
	default:
		return fmt.Errorf("unknown node command %q: drain, decommission or resume", action)
	}
	fs := flag.NewFlagSet("node "+action, flag.ExitOnError)
	host := fs.String("host", "127.0.0.1:8080", "HTTP address (--http-addr) of any node")
	user := fs.String("user", "root", "SQL account with SUPER, for a node whose HTTP address is not loopback")
	password := fs.String("password", os.Getenv("STRATA_PASSWORD"), "its password (default $STRATA_PASSWORD)")
	var hf httpFlags
	hf.register(fs)
	var id string
	rest := args[1:]
	if len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		id, rest = rest[0], rest[1:]
	}
	fs.Parse(rest)
	if id == "" && fs.NArg() > 0 {
		id = fs.Arg(0)
	}
	if id == "" {
		return fmt.Errorf("usage: strata node %s <node id> [--host H]", action)
	}
	cl, err := hf.client()
	if err != nil {
		return err
	}
	path := "/admin/nodes/" + url.PathEscape(id) + "/" + action
	post := func(scheme string) (*http.Response, error) {
		req, err := http.NewRequest(http.MethodPost, (&url.URL{Scheme: scheme, Host: *host, Path: path}).String(), nil)
		if err != nil {
			return nil, err
		}
		if *password != "" {
			req.SetBasicAuth(*user, *password)
		}
		return cl.Do(req)
	}
	// HTTPS first, plain HTTP to a node that answers in HTTP (one bound
	// to loopback), as `strata status` does.
	resp, err := hf.explain(post("https"))
	if err != nil && strings.Contains(err.Error(), "server gave HTTP response to HTTPS client") {
		resp, err = post("http")
	}
	if err != nil {
		return fmt.Errorf("cannot reach %s: %v", *host, err)
	}
	defer resp.Body.Close()
	var body map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		if resp.StatusCode == http.StatusUnauthorized {
			return fmt.Errorf("%s: give --user and --password of an account with SUPER", *host)
		}
		return fmt.Errorf("%s: %s", *host, resp.Status)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%v", body["error"])
	}
	fmt.Printf("node %s: %v\n", id, body["state"])
	switch action {
	case "drain":
		fmt.Println("its replicas and leaders move to other nodes; `strata status` shows when it holds none")
	case "decommission":
		fmt.Println("its replicas move to other nodes; once it holds none it is decommissioned and can be stopped")
	}
	return nil
}
