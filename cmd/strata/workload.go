package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"

	"github.com/strata-db/strata/internal/workload/cli"
)

// workloadCommand runs `strata workload ...` (see internal/workload/cli). The
// first SIGINT or SIGTERM stops a run gracefully, printing the final report;
// a second one kills the process.
func workloadCommand(args []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop()
	}()
	err := cli.Main(ctx, args, os.Stdout, os.Stderr)
	if errors.Is(err, cli.ErrUsage) {
		os.Exit(2)
	}
	return err
}
