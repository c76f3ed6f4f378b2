//go:build !unix

package mvcc

// allocRing returns n zeroed bytes (in the Go heap where anonymous
// mappings are not available).
func allocRing(n int) ([]byte, error) { return make([]byte, n), nil }

func freeRing([]byte) error { return nil }
