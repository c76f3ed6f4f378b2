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
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
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
		for i := len(running) - 1; i >= 0; i-- {
			running[i].Close()
		}
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
	fmt.Fprintln(w, "node\taddress\tsql\tredis\thttp\tstate\tsince\treplicas\tleaders")
	for _, n := range st.Nodes {
		state := "up"
		if !n.Up {
			state = "DOWN"
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\n", n.ID, n.Address, n.SQLAddress, n.RESPAddress, n.HTTPAddress,
			state, n.Since, n.Replicas, n.Leaders)
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
	fmt.Fprintln(w, "region\tstart\tend\tleader\treplicas (node:role:lag)")
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
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\n", name, r.StartKey, r.EndKey, r.LeaderStore, strings.Join(peers, " "))
	}
	w.Flush()
}
