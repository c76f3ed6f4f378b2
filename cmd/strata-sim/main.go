// Command strata-sim runs the placement simulator (package pdsim): the
// placement driver's schedulers over simulated stores and regions in
// virtual time. The default scenario is 100 stores and 10,000 regions
// with skewed, shifting load, stores added, failing and drained.
//
//	go run ./cmd/strata-sim [--stores 90] [--regions 10000] [--minutes 150] [--quiet]
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/strata-db/strata/internal/pdsim"
)

func main() {
	sc := pdsim.Default100()
	stores := flag.Int("stores", sc.Stores, "stores at the start (the scenario adds 10 at once, then fails, adds and drains a few)")
	regions := flag.Int("regions", sc.Regions, "regions")
	minutes := flag.Int("minutes", int(sc.Duration.Minutes()), "simulated minutes")
	skew := flag.Float64("skew", sc.Skew, "Zipf exponent of the regions' load")
	seed := flag.Int64("seed", sc.Seed, "random seed (the run is deterministic for a seed)")
	quiet := flag.Bool("quiet", false, "only the summary, not a line per simulated minute")
	flag.Parse()
	sc.Stores, sc.Regions, sc.Duration, sc.Skew, sc.Seed = *stores, *regions, time.Duration(*minutes)*time.Minute, *skew, *seed
	fmt.Printf("strata-sim: %d stores (+%d at once), %d regions of ~%d MiB, %d replicas, Zipf %.1f load (%.1f GiB/s read, %.0f MiB/s written),\n",
		sc.Stores, sc.Events[0].Count, sc.Regions, sc.RegionSize>>20, sc.Config.Replicas, sc.Skew, sc.ReadBytes/(1<<30), sc.WriteBytes/(1<<20))
	fmt.Printf("down-after %v, %d moves and %d leader transfers in flight per store, %d simulated minutes\nevents:",
		sc.Config.DownAfter, sc.Config.StoreLimit, sc.Config.LeaderLimit, *minutes)
	for _, ev := range sc.Events {
		fmt.Printf(" %v %s", ev.At, ev.Kind)
		if ev.Count > 0 {
			fmt.Printf(" %d", ev.Count)
		}
		fmt.Print(";")
	}
	fmt.Println()
	fmt.Println()
	var log io.Writer = os.Stdout
	if *quiet {
		log = nil
	}
	rep := pdsim.Run(sc, log)
	rep.Print(os.Stdout, sc.Tolerance)
}
