// Command devbroker serves the Kafka protocol for development, demos and
// tests, so pgoutbox can be tried and tested on machines without a Kafka
// cluster. It is franz-go's kfake broker behind a small command line: one
// broker, topics created on first use, and optional persistence in a data
// directory that survives restarts and, with synchronous writes (the
// default), a SIGKILL after a produce was acknowledged.
//
// It is not a Kafka replacement: there is no replication and its speed says
// nothing about a real cluster.
//
// Usage:
//
//	devbroker [--listen 127.0.0.1:9092] [--data-dir DIR] [--partitions 3]
//	          [--max-message-bytes 1048588] [--advertise HOST:PORT] [--log-level error]
//
// It prints "devbroker ready on HOST:PORT" on stdout once it accepts
// connections and serves until SIGTERM or SIGINT, then saves its state and
// exits 0. Bad flags exit 2.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	// After the first signal, restore the default handling so that a second
	// one kills a shutdown that hangs (kfake saves its state on close).
	context.AfterFunc(ctx, stop)

	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
		// The usage was printed; asking for it is not an error.
	case errors.As(err, new(*usageError)):
		fmt.Fprintf(os.Stderr, "devbroker: %v\nRun 'devbroker -h' for the flags.\n", err)
		os.Exit(2)
	default:
		fmt.Fprintf(os.Stderr, "devbroker: %v\n", err)
		os.Exit(1)
	}
}

// usageError marks an error in the command line, which exits 2 like the flag
// package does, rather than 1 for a failure to serve.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }
