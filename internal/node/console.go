package node

import (
	_ "embed"
	"net/http"
)

// The HTTP console: GET / is one page (console/index.html, no external
// assets) that shows the nodes, a key-space heat map of every region over
// the last three minutes, the hottest ranges, every region and PD's
// operator log. It reads /status, which any node serves, and names key
// ranges from /admin/tables (behind the admin guard beyond loopback: a
// browser that may not read it shows table ids).

//go:embed console/index.html
var consolePage []byte

func (n *Node) handleConsole(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	// The page's own inline script and style, and fetches to this node.
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	w.Write(consolePage)
}

// handleTables serves GET /admin/tables: table id -> names.
func (n *Node) handleTables(w http.ResponseWriter, r *http.Request) {
	if n.sql == nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "the SQL engine has not started"})
		return
	}
	writeJSON(w, http.StatusOK, n.sql.TableNames())
}
