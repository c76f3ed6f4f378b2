package workload

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"
)

// MySQLConfig is the driver configuration of the SQL workloads (TPC-C,
// TPC-H): user (root when empty), password, address and database, a dial
// timeout, writes bounded to 5 minutes, reads to readTimeout (0: none).
func MySQLConfig(user, password, addr, database string, dial, readTimeout time.Duration) *mysql.Config {
	mc := mysql.NewConfig()
	mc.User = user
	if mc.User == "" {
		mc.User = "root"
	}
	mc.Passwd = password
	mc.Net = "tcp"
	mc.Addr = addr
	mc.DBName = database
	mc.Timeout = dial
	mc.ReadTimeout = readTimeout
	mc.WriteTimeout = 5 * time.Minute
	return mc
}

// OpenMySQL returns a pool of conns connections for mc, checked with a
// ping.
func OpenMySQL(ctx context.Context, mc *mysql.Config, conns int) (*sql.DB, error) {
	connector, err := mysql.NewConnector(mc)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("server at %s: %w", mc.Addr, err)
	}
	return db, nil
}
