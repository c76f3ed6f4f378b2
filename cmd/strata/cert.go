package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/strata-db/strata/internal/certs"
)

// certCommand implements `strata cert`, as `cockroach cert`:
//
//	strata cert create-ca     --certs-dir DIR --ca-key-dir DIR
//	strata cert create-node   --certs-dir DIR --ca-key-dir DIR ADDR...
//	strata cert create-client --certs-dir DIR --ca-key-dir DIR USER
func certCommand(args []string) error {
	if len(args) == 0 {
		return certUsage()
	}
	fs := flag.NewFlagSet("cert "+args[0], flag.ExitOnError)
	certsDir := fs.String("certs-dir", "certs", "directory the certificates are written to (a node's --certs-dir)")
	caDir := fs.String("ca-key-dir", "ca", "directory of the CA's ca.crt and ca.key (keep it off the nodes)")
	fs.Parse(args[1:])
	switch args[0] {
	case "create-ca":
		if err := certs.CreateCA(*caDir); err != nil {
			return err
		}
		fmt.Printf("wrote %s/ca.crt and %s/ca.key\n", *caDir, *caDir)
	case "create-node":
		if err := certs.CreateNode(*certsDir, *caDir, fs.Args()); err != nil {
			return err
		}
		fmt.Printf("wrote %s/node.crt, %s/node.key and %s/ca.crt\n", *certsDir, *certsDir, *certsDir)
	case "create-client":
		if fs.NArg() != 1 {
			return fmt.Errorf("create-client takes one user name")
		}
		if err := certs.CreateClient(*certsDir, *caDir, fs.Arg(0)); err != nil {
			return err
		}
		fmt.Printf("wrote %s/client.%s.crt and .key\n", *certsDir, fs.Arg(0))
	default:
		return certUsage()
	}
	return nil
}

func certUsage() error {
	fmt.Fprint(os.Stderr, `Usage:
  strata cert create-ca     [--ca-key-dir ca]                       a cluster CA: ca.crt, ca.key
  strata cert create-node   [--certs-dir certs] [--ca-key-dir ca] ADDR...   node.crt/.key for a node's addresses
  strata cert create-client [--certs-dir certs] [--ca-key-dir ca] USER      client.USER.crt/.key
`)
	return fmt.Errorf("unknown or missing cert command")
}
