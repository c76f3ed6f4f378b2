// Command bruteforce logs in to a MySQL server with a wrong password in a
// loop, one new connection per attempt (as a password-guessing client
// does), and prints how many attempts it made, how many were refused and
// how long they took. bench/bruteforce.sh runs it next to sysbench.
//
//	go run ./bench/bruteforce -addr 127.0.0.1:4400 -user victim -n 10000 -for 15s
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:4000", "MySQL address")
	user := flag.String("user", "root", "account to guess the password of")
	n := flag.Int("n", 10000, "attempts")
	dur := flag.Duration("for", time.Minute, "stop after this long even if attempts remain")
	conc := flag.Int("c", 1, "attempts in flight")
	flag.Parse()

	cfg := mysql.NewConfig()
	cfg.Net, cfg.Addr, cfg.User, cfg.Passwd = "tcp", *addr, *user, "not-the-password"
	cfg.Timeout = 30 * time.Second
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *dur)
	defer cancel()
	var next, refused, other atomic.Int64
	var firstOther atomic.Value
	start := time.Now()
	var wg sync.WaitGroup
	for range *conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(*n) && ctx.Err() == nil {
				c, err := conn.Connect(ctx)
				var me *mysql.MySQLError
				switch {
				case err == nil:
					c.Close()
					log.Fatal("the wrong password was accepted")
				case errors.As(err, &me) && me.Number == 1045:
					refused.Add(1)
				case ctx.Err() != nil:
					// cut short by -for: not an attempt the server answered
				default:
					other.Add(1)
					firstOther.CompareAndSwap(nil, err.Error())
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	fmt.Fprintf(os.Stdout, "attempts=%d refused=%d other_errors=%d seconds=%.1f per_second=%.0f",
		refused.Load()+other.Load(), refused.Load(), other.Load(), el.Seconds(), float64(refused.Load()+other.Load())/el.Seconds())
	if e, ok := firstOther.Load().(string); ok {
		fmt.Fprintf(os.Stdout, " first_other_error=%q", e)
	}
	fmt.Println()
}
