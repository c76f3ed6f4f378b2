// Package e2e holds end-to-end tests of the client library against a real
// in-process Strata node (Raft store, placement driver, KV service). They
// live apart from package client's unit tests so that those build and run
// without the rest of the node.
package e2e
