// Package checker decides whether a chaos run's history (package history) is
// one the database promised: snapshot isolation for SQL transactions
// (listappend.go, an Elle-style dependency-cycle checker; bank.go;
// longfork.go), linearizability per key for the Redis API (register.go, with
// porcupine), no lost or invented writes (set.go) and reads that never go
// back in time (monotonic.go). adya.go runs the independent adya checker on
// a list-append history so that two separately written checkers can be
// compared.
//
// Every checker is pure: it reads a slice of history.Op and returns a Result.
// None of them trusts an info (unknown outcome) operation's reads; its writes
// may or may not have happened, and a checker only concludes that one did
// when some read shows it.
package checker

import (
	"fmt"
	"sort"
	"strings"
)

// Verdict is a checker's conclusion.
type Verdict string

const (
	Valid   Verdict = "valid"
	Invalid Verdict = "invalid"
	Unknown Verdict = "unknown" // nothing to judge, or the check gave up
)

// Worst combines verdicts: invalid beats unknown beats valid.
func Worst(vs ...Verdict) Verdict {
	w := Valid
	for _, v := range vs {
		switch {
		case v == Invalid:
			return Invalid
		case v == Unknown:
			w = Unknown
		}
	}
	return w
}

// maxExamples bounds how many examples of one anomaly type a Result keeps.
const maxExamples = 8

// Anomaly is one example of something the promise forbids (or, for types a
// model allows, something worth knowing).
type Anomaly struct {
	Type        string `json:"type"`
	Explanation string `json:"explanation"`
}

// Result is a checker's report.
type Result struct {
	Checker string  `json:"checker"`
	Verdict Verdict `json:"verdict"`
	// Anomalies holds up to maxExamples examples of each type found; Found
	// counts all of them by type.
	Anomalies []Anomaly      `json:"anomalies,omitempty"`
	Found     map[string]int `json:"found,omitempty"`
	// Counts are the numbers of operations by kind and outcome, and what
	// the checker measured (lost writes, reads checked, ...).
	Counts map[string]int `json:"counts,omitempty"`
	Notes  []string       `json:"notes,omitempty"`
}

func newResult(name string) *Result {
	return &Result{Checker: name, Verdict: Valid, Found: map[string]int{}, Counts: map[string]int{}}
}

// add records an anomaly of type typ; forbidden makes the verdict invalid.
func (r *Result) add(typ string, forbidden bool, format string, args ...any) {
	r.Found[typ]++
	if r.Found[typ] <= maxExamples {
		r.Anomalies = append(r.Anomalies, Anomaly{Type: typ, Explanation: fmt.Sprintf(format, args...)})
	}
	if forbidden {
		r.Verdict = Invalid
	}
}

func (r *Result) note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

// Types lists the anomaly types found, sorted.
func (r *Result) Types() []string {
	var ts []string
	for t := range r.Found {
		ts = append(ts, t)
	}
	sort.Strings(ts)
	return ts
}

// Summary is one line: checker, verdict and the anomaly types with counts.
func (r *Result) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", r.Checker, r.Verdict)
	if len(r.Found) > 0 {
		b.WriteString(" (")
		for i, t := range r.Types() {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%s x%d", t, r.Found[t])
		}
		b.WriteString(")")
	}
	return b.String()
}
