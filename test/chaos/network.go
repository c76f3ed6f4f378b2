package chaos

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// Network is where the nodes and the clients live and how faults reach the
// links between them.
//
// In netns mode every node runs in a network namespace of its own, joined by
// a veth pair to a Linux bridge that lives in a private hub namespace;
// clients dial from a client namespace on the same bridge. Partitions and
// packet loss are iptables rules inside the node namespaces, keyed by peer
// address, so clients (198.51.100.100) are never cut off and can still reach
// a minority node. The root namespace's network is never touched: veth pairs
// are created inside the hub namespace and their ends moved from there.
//
// In loopback mode every node listens on 127.0.0.1 with ports of its own and
// the only link faults are those of the proxies (proxy.go).
type Network struct {
	Mode string // "netns" or "loopback"
	// Why is the reason netns mode was not used, when it was not.
	Why string

	tag    string // names this run's namespaces and interfaces
	hub    string
	cli    string
	nodeNS map[string]string // node name -> namespace
	nodeIP map[string]string
}

// Addresses of netns mode: a documentation range (RFC 5737) that can never
// be anyone's real host.
const (
	netnsSubnet   = "198.51.100."
	clientIP      = "198.51.100.100"
	netnsPrefixBr = "chaos" // namespaces are chaos<tag>-<name>, after the branch that made them
)

// NewNetwork sets up netns mode for the named nodes when asked (want =
// "netns" or "auto") and possible (root, ip, iptables), and loopback mode
// otherwise, with the reason in Why. want "loopback" skips netns.
func NewNetwork(want string, nodes []string) (*Network, error) {
	nw := &Network{Mode: "loopback", nodeNS: map[string]string{}, nodeIP: map[string]string{}}
	if want == "loopback" {
		nw.Why = "loopback asked for"
		return nw, nil
	}
	err := nw.setupNetns(nodes)
	if err == nil {
		nw.Mode = "netns"
		return nw, nil
	}
	nw.teardown()
	nw.nodeNS, nw.nodeIP = map[string]string{}, map[string]string{}
	if want == "netns" {
		return nil, fmt.Errorf("network namespaces: %v", err)
	}
	nw.Why = err.Error()
	return nw, nil
}

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (nw *Network) setupNetns(nodes []string) error {
	if os.Geteuid() != 0 {
		return errors.New("not root")
	}
	for _, tool := range []string{"ip", "iptables"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s not installed", tool)
		}
	}
	b := make([]byte, 2)
	rand.Read(b)
	nw.tag = hex.EncodeToString(b)
	nw.hub = netnsPrefixBr + nw.tag + "-hub"
	nw.cli = netnsPrefixBr + nw.tag + "-cli"
	if err := run("ip", "netns", "add", nw.hub); err != nil {
		return err
	}
	if err := run("ip", "-n", nw.hub, "link", "add", "br0", "type", "bridge"); err != nil {
		return err
	}
	if err := run("ip", "-n", nw.hub, "link", "set", "br0", "up"); err != nil {
		return err
	}
	attach := func(name, ns, ip string) error {
		if err := run("ip", "netns", "add", ns); err != nil {
			return err
		}
		// Interface names are at most 15 bytes: c<tag><name> and h<tag><name>.
		inner, outer := "c"+nw.tag+name, "h"+nw.tag+name
		steps := [][]string{
			{"-n", nw.hub, "link", "add", outer, "type", "veth", "peer", "name", inner, "netns", ns},
			{"-n", nw.hub, "link", "set", outer, "master", "br0", "up"},
			{"-n", ns, "addr", "add", ip + "/24", "dev", inner},
			{"-n", ns, "link", "set", inner, "up"},
			{"-n", ns, "link", "set", "lo", "up"},
		}
		for _, s := range steps {
			if err := run("ip", s...); err != nil {
				return err
			}
		}
		return nil
	}
	if err := attach("cl", nw.cli, clientIP); err != nil {
		return err
	}
	for i, n := range nodes {
		ns := netnsPrefixBr + nw.tag + "-" + n
		ip := fmt.Sprintf("%s%d", netnsSubnet, 11+i)
		nw.nodeNS[n], nw.nodeIP[n] = ns, ip
		if err := attach(n, ns, ip); err != nil {
			return err
		}
		if err := run("ip", "netns", "exec", ns, "iptables", "-F"); err != nil {
			return err
		}
	}
	// The client namespace must be usable for sockets from this process.
	c, err := nw.Listen("127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("entering the client namespace: %v", err)
	}
	c.Close()
	return nil
}

func (nw *Network) teardown() {
	for _, ns := range nw.nodeNS {
		exec.Command("ip", "netns", "del", ns).Run()
	}
	if nw.cli != "" {
		exec.Command("ip", "netns", "del", nw.cli).Run()
	}
	if nw.hub != "" {
		exec.Command("ip", "netns", "del", nw.hub).Run()
	}
}

// Close removes the namespaces (and with them every veth, bridge and rule).
func (nw *Network) Close() {
	if nw.Mode == "netns" {
		nw.teardown()
	}
}

// Describe says which mode is in use and why.
func (nw *Network) Describe() string {
	if nw.Mode == "netns" {
		return fmt.Sprintf("netns: nodes in namespaces %s-*, clients in %s (%s), bridge in %s", netnsPrefixBr+nw.tag, nw.cli, clientIP, nw.hub)
	}
	return "loopback (" + nw.Why + "): partitions and packet loss are unavailable; link faults only through proxies"
}

// HostOf is the address node listens on and is reached at.
func (nw *Network) HostOf(node string) string {
	if ip, ok := nw.nodeIP[node]; ok {
		return ip
	}
	return "127.0.0.1"
}

// ClientHost is the address proxies of this harness listen on.
func (nw *Network) ClientHost() string {
	if nw.Mode == "netns" {
		return clientIP
	}
	return "127.0.0.1"
}

// inClientNS runs f on an OS thread that has entered the client namespace;
// sockets created there stay in it. The thread is never reused: the
// goroutine exits still locked to it, so Go retires the thread.
func (nw *Network) inClientNS(f func()) error {
	if nw.Mode != "netns" {
		f()
		return nil
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		fd, err := unix.Open("/run/netns/"+nw.cli, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- err
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			errc <- err
			return
		}
		f()
		errc <- nil
	}()
	return <-errc
}

// DialContext dials from the client namespace (or plainly, in loopback mode).
func (nw *Network) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	var err error
	if e := nw.inClientNS(func() { c, err = (&net.Dialer{}).DialContext(ctx, network, addr) }); e != nil {
		return nil, e
	}
	return c, err
}

// Listen listens in the client namespace.
func (nw *Network) Listen(addr string) (net.Listener, error) {
	var l net.Listener
	var err error
	if e := nw.inClientNS(func() { l, err = net.Listen("tcp", addr) }); e != nil {
		return nil, e
	}
	return l, err
}

// Command runs argv inside node's namespace (plainly in loopback mode).
func (nw *Network) Command(node string, argv ...string) *exec.Cmd {
	if ns, ok := nw.nodeNS[node]; ok {
		return exec.Command("ip", append([]string{"netns", "exec", ns}, argv...)...)
	}
	return exec.Command(argv[0], argv[1:]...)
}

// Block drops, inside node's namespace, packets from (and, unless inboundOnly,
// to) the given peers. With probability p < 1 a random share p of them is
// dropped instead (packet loss). It returns the rules it added, for the
// record.
func (nw *Network) Block(node string, peers []string, inboundOnly bool, p float64) ([]string, error) {
	ns, ok := nw.nodeNS[node]
	if !ok {
		return nil, errors.New("partitions need netns mode")
	}
	var rules []string
	for _, peer := range peers {
		ip := nw.nodeIP[peer]
		specs := [][]string{{"INPUT", "-s", ip}}
		if !inboundOnly {
			specs = append(specs, []string{"OUTPUT", "-d", ip})
		}
		for _, s := range specs {
			args := append([]string{"-A"}, s...)
			if p < 1 {
				args = append(args, "-m", "statistic", "--mode", "random", "--probability", fmt.Sprintf("%.2f", p))
			}
			args = append(args, "-j", "DROP")
			if err := run("ip", append([]string{"netns", "exec", ns, "iptables"}, args...)...); err != nil {
				return rules, err
			}
			rules = append(rules, fmt.Sprintf("%s: iptables %s", node, strings.Join(args, " ")))
		}
	}
	return rules, nil
}

// Heal flushes every node's iptables rules.
func (nw *Network) Heal() error {
	var first error
	for _, ns := range nw.nodeNS {
		if err := run("ip", "netns", "exec", ns, "iptables", "-F"); err != nil && first == nil {
			first = err
		}
	}
	return first
}
