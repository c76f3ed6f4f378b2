//go:build !linux

package server

// Elsewhere a connection waits in the poller at once.
const pollSupported = false

func yieldCPU() {}
