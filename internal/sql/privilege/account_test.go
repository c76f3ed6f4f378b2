package privilege

import "testing"

func TestHostMatches(t *testing.T) {
	for _, c := range []struct {
		pattern, ip string
		loopback    bool
		want        bool
	}{
		{"%", "203.0.113.9", false, true},
		{"localhost", "127.0.0.1", true, true},
		{"localhost", "::1", true, true},
		{"localhost", "10.0.0.1", false, false},
		{"127.0.0.1", "127.0.0.1", true, true},
		{"127.0.0.1", "::ffff:127.0.0.1", true, true},
		{"10.0.%", "10.0.3.4", false, true},
		{"10.0.%", "10.1.3.4", false, false},
		{"10.0.0._", "10.0.0.7", false, true},
		{"10.0.0._", "10.0.0.17", false, false},
		{"10.0.0.0/255.255.255.0", "10.0.0.200", false, true},
		{"10.0.0.0/255.255.255.0", "::ffff:10.0.0.200", false, true},
		{"10.0.0.0/255.255.255.0", "10.0.1.1", false, false},
		{"10.0.0.0/255.255.240.0", "10.0.15.1", false, true},
		{"10.0.0.0/255.255.240.0", "10.0.16.1", false, false},
		{"10.0.0.0/24", "10.0.0.9", false, true},
		{"10.0.0.0/24", "10.0.1.9", false, false},
		{"fd00::/8", "fd12::1", false, true},
		{"fd00::/8", "fe80::1", false, false},
		// Host bits outside the mask, a mask with holes, nonsense: nothing.
		{"10.0.0.1/255.255.255.0", "10.0.0.1", false, false},
		{"10.0.0.0/255.0.255.0", "10.0.0.1", false, false},
		{"10.0.0.0/abc", "10.0.0.1", false, false},
		{"10.0.0.0/33", "10.0.0.1", false, false},
		{"db.example.com", "10.0.0.1", false, false},
	} {
		if got := hostMatches(c.pattern, c.ip, c.loopback); got != c.want {
			t.Errorf("hostMatches(%q, %q, %v) = %v, want %v", c.pattern, c.ip, c.loopback, got, c.want)
		}
	}
}

// TestMatchOrder: the most specific account of a user wins, as MySQL
// sorts its user table.
func TestMatchOrder(t *testing.T) {
	var accts []*Account
	for _, h := range []string{"%", "10.%", "10.0.%", "10.0.0.0/255.0.0.0", "10.0.0.0/255.255.255.0", "10.0.0.5", "localhost"} {
		accts = append(accts, &Account{Identity: Identity{User: "u", Host: h}})
	}
	accts = append(accts, &Account{Identity: Identity{User: "v", Host: "10.0.0.5"}})
	s := NewSnapshot(1, accts)
	for _, c := range []struct {
		ip       string
		loopback bool
		want     string
	}{
		{"10.0.0.5", false, "10.0.0.5"},
		{"10.0.0.6", false, "10.0.0.0/255.255.255.0"},
		{"10.0.1.6", false, "10.0.0.0/255.0.0.0"},
		{"127.0.0.1", true, "localhost"},
		{"192.168.1.1", false, "%"},
	} {
		a := s.Match("u", c.ip, c.loopback)
		if a == nil || a.Host != c.want {
			t.Errorf("Match(u, %s) = %v, want host %s", c.ip, a, c.want)
		}
	}
	if a := s.Match("w", "10.0.0.5", false); a != nil {
		t.Errorf("Match of an unknown user = %v", a.Identity)
	}
	// Among patterns the longer literal prefix wins.
	s = NewSnapshot(1, []*Account{{Identity: Identity{User: "u", Host: "%"}}, {Identity: Identity{User: "u", Host: "10.%"}}, {Identity: Identity{User: "u", Host: "10.0.%"}}})
	if a := s.Match("u", "10.0.9.9", false); a.Host != "10.0.%" {
		t.Errorf("Match = %s, want 10.0.%%", a.Host)
	}
	if a := s.Match("u", "10.1.9.9", false); a.Host != "10.%" {
		t.Errorf("Match = %s, want 10.%%", a.Host)
	}
}

func TestDBPatterns(t *testing.T) {
	for _, c := range []struct {
		pattern, db string
		want        bool
	}{
		{`app\_%`, "app_1", true},
		{`app\_%`, "app_", true},
		{`app\_%`, "appx1", false},
		{`app_%`, "appx1", true},
		{`app\_1`, "app_1", true},
		{`app\_1`, "appx1", false},
		{`a\%b`, "a%b", true},
		{`a\%b`, "axb", false},
		{`ä_c`, "äbc", true},
		{`App\_%`, "APP_x", true},
	} {
		if got := DBPatternMatches(c.pattern, c.db); got != c.want {
			t.Errorf("DBPatternMatches(%q, %q) = %v, want %v", c.pattern, c.db, got, c.want)
		}
	}
	a := &Account{Identity: Identity{User: "u", Host: "%"}}
	a.Grant(`app\_%`, "", "", Select)
	a.Grant(`app\_admin`, "", "", Select|Insert)
	a.Grant(`app\_a%`, "", "", Delete)
	s := NewSnapshot(1, []*Account{a})
	set := s.Effective(s.Get(a.Identity), nil)
	for db, want := range map[string]Priv{"app_admin": Select | Insert, "app_audit": Delete, "app_x": Select, "other": 0, "app": 0} {
		if got := set.DB(db); got != want {
			t.Errorf("DB(%s) = %v, want %v", db, got, want)
		}
	}
	if !set.AnyInDB("app_x") || set.AnyInDB("appx") {
		t.Errorf("AnyInDB does not follow the patterns")
	}
	// What a holder of a pattern may grant on.
	g := &Account{Identity: Identity{User: "g", Host: "%"}}
	g.Grant(`app\_%`, "", "", Select|GrantOpt)
	s = NewSnapshot(2, []*Account{g})
	gs := s.Effective(s.Get(g.Identity), nil)
	for pat, want := range map[string]bool{`app\_%`: true, `app\_1`: true, `app\_1%`: true, `app\__`: true, "app_1": false, "%": false, `app%`: false, "appx": false} {
		if got := gs.DBGrant(pat)&Select != 0; got != want {
			t.Errorf("DBGrant(%s) holds SELECT: %v, want %v", pat, got, want)
		}
	}
}
