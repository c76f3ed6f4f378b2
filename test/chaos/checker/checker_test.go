package checker

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/strata-db/strata/test/chaos/history"
)

// Every history in testdata/<checker>/ is named for what it holds: valid.jsonl
// must pass, and <anomaly>.jsonl must fail with that anomaly among those
// found. These are the hand-written anomalous histories each checker has to
// catch.
func checkTestdata(t *testing.T, dir string, check func(path string, ops []history.Op) *Result) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", dir, "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no histories in testdata/%s: %v", dir, err)
	}
	for _, path := range files {
		name := strings.TrimSuffix(filepath.Base(path), ".jsonl")
		t.Run(name, func(t *testing.T) {
			ops, err := history.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			res := check(path, ops)
			if name == "valid" {
				if res.Verdict != Valid {
					t.Fatalf("want valid, got %s: %+v", res.Summary(), res.Anomalies)
				}
				return
			}
			if res.Verdict != Invalid || res.Found[name] == 0 {
				t.Fatalf("want invalid with %s, got %s %+v %v", name, res.Summary(), res.Anomalies, res.Notes)
			}
		})
	}
}

func TestBankCatches(t *testing.T) {
	checkTestdata(t, "bank", func(_ string, ops []history.Op) *Result {
		return CheckBank(ops, BankOptions{Accounts: 3, Total: 300})
	})
}

func TestSetCatches(t *testing.T) {
	checkTestdata(t, "set", func(_ string, ops []history.Op) *Result { return CheckSet(ops) })
}

func TestLongForkCatches(t *testing.T) {
	checkTestdata(t, "long-fork", func(_ string, ops []history.Op) *Result { return CheckLongFork(ops) })
}

func TestMonotonicCatches(t *testing.T) {
	checkTestdata(t, "monotonic", func(_ string, ops []history.Op) *Result { return CheckMonotonic(ops) })
}

func TestRegisterCatches(t *testing.T) {
	checkTestdata(t, "register", func(_ string, ops []history.Op) *Result {
		return CheckRegister(ops, RegisterOptions{VisualizePath: filepath.Join(t.TempDir(), "v.html")})
	})
}

// Under serializability every anomaly history fails; under snapshot
// isolation all but write skew (G2-item with adjacent rw edges) do.
func TestListAppendCatches(t *testing.T) {
	checkTestdata(t, "listappend", func(_ string, ops []history.Op) *Result {
		return CheckListAppend(ops, ListAppendOptions{Model: Serializable})
	})
	files, _ := filepath.Glob("testdata/listappend/*.jsonl")
	for _, path := range files {
		name := strings.TrimSuffix(filepath.Base(path), ".jsonl")
		ops, err := history.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		res := CheckListAppend(ops, ListAppendOptions{Model: SnapshotIsolation})
		want := Invalid
		if name == "valid" || name == "G2-item" {
			want = Valid
		}
		if res.Verdict != want {
			t.Errorf("%s under snapshot isolation: want %s, got %s", name, want, res.Summary())
		}
		if name == "G2-item" && res.Found["G2-item"] == 0 {
			t.Errorf("write skew is allowed under snapshot isolation but must still be reported: %s", res.Summary())
		}
	}
}

// adya, written separately from this package, must reach the same verdicts
// on the same histories (except garbage reads, which adya does not judge:
// it reports an empty transaction graph, unknown).
func TestAdyaAgrees(t *testing.T) {
	if AdyaPath() == "" {
		t.Skip("adya is not installed (cargo install adya)")
	}
	files, _ := filepath.Glob("testdata/listappend/*.jsonl")
	for _, model := range []string{SnapshotIsolation, Serializable} {
		for _, path := range files {
			ops, err := history.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			ours := CheckListAppend(ops, ListAppendOptions{Model: model})
			theirs := CheckAdya(path, model)
			name := strings.TrimSuffix(filepath.Base(path), ".jsonl")
			if theirs.Verdict == Unknown && name != "garbage-read" {
				t.Errorf("%s (%s): adya gave no verdict: %s %v", name, model, theirs.Summary(), theirs.Notes)
			}
			if d := Agree(ours, theirs); d != "" {
				t.Errorf("%s (%s): %s", name, model, d)
			}
			if theirs.Verdict == Invalid && name != "valid" && !slices.Contains(theirs.Types(), name) {
				t.Errorf("%s (%s): adya found %v", name, model, theirs.Types())
			}
		}
	}
}
