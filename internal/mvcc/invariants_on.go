//go:build invariants || race

package mvcc

// invariantsEnabled turns on consistency checks that cost too much for
// production: built with -tags invariants, and under -race.
const invariantsEnabled = true
