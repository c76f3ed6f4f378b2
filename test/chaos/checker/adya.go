package checker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// AdyaPath finds the adya binary (crates.io's adya, `cargo install adya`):
// $ADYA, then $PATH, then ~/.cargo/bin. It returns "" when there is none.
func AdyaPath() string {
	if p := os.Getenv("ADYA"); p != "" {
		return p
	}
	if p, err := exec.LookPath("adya"); err == nil {
		return p
	}
	if home, err := os.UserHomeDir(); err == nil {
		p := filepath.Join(home, ".cargo", "bin", "adya")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// CheckAdya runs `adya check -m list-append -c model --json` on a JSON-lines
// list-append history file. Without adya the verdict is unknown.
func CheckAdya(historyPath, model string) *Result {
	res := newResult("adya list-append (" + model + ")")
	bin := AdyaPath()
	if bin == "" {
		res.Verdict = Unknown
		res.note("adya is not installed (cargo install adya)")
		return res
	}
	cmd := exec.Command(bin, "check", "-m", "list-append", "-c", model, "--cycle-search-timeout", "10000", "--json", historyPath)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		res.Verdict = Unknown
		res.note("running adya: %v", err)
		return res
	}
	var report struct {
		Valid        any      `json:"valid"`
		AnomalyTypes []string `json:"anomaly_types"`
		Anomalies    map[string][]struct {
			Explanation string `json:"explanation"`
		} `json:"anomalies"`
	}
	if jerr := json.Unmarshal(stdout.Bytes(), &report); jerr != nil {
		res.Verdict = Unknown
		res.note("adya's report is not JSON (%v): %s %s", jerr, firstLine(stdout.String()), firstLine(stderr.String()))
		return res
	}
	code := 0
	if exit != nil {
		code = exit.ExitCode()
	}
	// adya reports, as elle-cli does, every anomaly it found; its exit status
	// says whether the model allows them.
	for _, typ := range report.AnomalyTypes {
		ex := report.Anomalies[typ]
		n := len(ex)
		if n == 0 {
			n = 1
		}
		for i := 0; i < n; i++ {
			text := ""
			if i < len(ex) {
				text = ex[i].Explanation
			}
			res.add(typ, false, "%s", strings.TrimSpace(text))
		}
	}
	switch code {
	case 0:
		res.Verdict = Valid
	case 1:
		res.Verdict = Invalid
	default:
		res.Verdict = Unknown
		res.note("adya exited with status %d: %s", code, firstLine(stderr.String()))
	}
	return res
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// Agree compares two checkers' verdicts on the same history: they agree
// when both are valid or both invalid (an unknown agrees with nothing but
// is not a disagreement either). It returns a description of any
// disagreement, "" if none.
func Agree(a, b *Result) string {
	if a.Verdict == Unknown || b.Verdict == Unknown || a.Verdict == b.Verdict {
		return ""
	}
	ta, tb := a.Types(), b.Types()
	sort.Strings(ta)
	sort.Strings(tb)
	return fmt.Sprintf("%s says %s %v, %s says %s %v", a.Checker, a.Verdict, ta, b.Checker, b.Verdict, tb)
}
