package integration

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// TestConsoleInHeadlessChromium loads the HTTP console (GET /) of a node
// whose table is split into regions in Debian's Chromium, headless, lets
// its script poll /status, and reads the page it built: one row per node,
// every region in the heat map with cells drawn, ranges named by table,
// no script error.
func TestConsoleInHeadlessChromium(t *testing.T) {
	browser := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			browser = p
			break
		}
	}
	if browser == "" {
		t.Skip("no Chromium (scripts/test.sh installs Debian's chromium)")
	}
	n := StartNode(t)
	db := n.DB(t, "")
	mustExec(t, db, "CREATE DATABASE shop",
		"CREATE TABLE shop.items (id INT PRIMARY KEY, name VARCHAR(20), KEY byname (name))",
		"INSERT INTO shop.items VALUES (1, 'a'), (2, 'b'), (30, 'c'), (60, 'd')",
		"SPLIT TABLE shop.items BETWEEN (0) AND (100) REGIONS 4")

	profile := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// --virtual-time-budget lets the page's timers and fetches run (three
	// polls) before the DOM is printed.
	cmd := exec.CommandContext(ctx, browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--user-data-dir="+profile, "--virtual-time-budget=5000", "--dump-dom", "http://"+n.HTTPAddr+"/")
	cmd.Env = append(os.Environ(), "HOME="+profile)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	dom := string(out)
	attr := func(name string) int {
		m := regexp.MustCompile(name + `="(\d+)"`).FindStringSubmatch(dom)
		if m == nil {
			t.Fatalf("the page has no %s (not rendered?):\n%.2000s", name, dom)
		}
		v, _ := strconv.Atoi(m[1])
		return v
	}
	if attr("data-ready") != 1 || attr("data-nodes") != 1 {
		t.Fatalf("page not rendered with one node:\n%.2000s", dom)
	}
	regions := attr("data-regions")
	if regions < 5 { // PD's, the one before the table, four of the table
		t.Fatalf("%d regions on the page, want at least 5", regions)
	}
	if rows := attr("data-rows"); rows != regions {
		t.Fatalf("heat map has %d rows for %d regions", rows, regions)
	}
	if cells := attr("data-cells"); cells < regions {
		t.Fatalf("heat map drew %d cells for %d regions", cells, regions)
	}
	for _, want := range []string{"shop.items row 25", "shop.items row 50", "(placement driver)", ">serving<"} {
		if !regexp.MustCompile(regexp.QuoteMeta(want)).MatchString(dom) {
			t.Errorf("page lacks %q", want)
		}
	}
	if !regexp.MustCompile(`id="errors" role="alert" hidden`).MatchString(dom) {
		t.Errorf("the page shows an error:\n%s", regexp.MustCompile(`(?s)<div id="errors".*?</div>`).FindString(dom))
	}
}
