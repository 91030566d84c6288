package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/pgoutbox/pgoutbox/relay"
)

// serveOps serves the relay's /metrics, /healthz and /readyz (ops, a
// relay's Handler) on addr until the returned function is called, and Go's
// profiles under /debug/pprof/ when withPprof. It listens before
// returning, so a bad or busy address fails the start.
func serveOps(addr string, withPprof bool, ops http.Handler, log *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	h, paths := ops, "/metrics /healthz /readyz"
	if withPprof {
		mux := http.NewServeMux()
		mux.Handle("/", h)
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		h, paths = mux, paths+" /debug/pprof/"
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped", "err", err)
		}
	}()
	log.Info("serving metrics and health", "addr", ln.Addr().String(), "paths", paths)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		<-done
	}, nil
}

// opsFlags are run's flags for the metrics server.
type opsFlags struct {
	addr  *string
	pprof *bool
}

// registerOpsFlags adds run's operations flags.
func registerOpsFlags(fs *flag.FlagSet, cfg *relay.Config) opsFlags {
	addr := fs.String("metrics-addr", "", "serve /metrics, /healthz and /readyz on this address, e.g. :9187 (default off)")
	pp := fs.Bool("pprof", false, "also serve Go's CPU, heap and goroutine profiles under /debug/pprof/ on --metrics-addr")
	fs.DurationVar(&cfg.Operations.MonitorInterval, "metrics-interval", 10*time.Second, "how often slot lag and unpublished rows are read and both ends checked, with --metrics-addr")
	fs.DurationVar(&cfg.Operations.Retention, "retention", 0, "delete published outbox rows older than this, e.g. 168h (default 0: never; the rows are yours)")
	fs.DurationVar(&cfg.Operations.RetentionInterval, "retention-interval", 5*time.Minute, "how often retention runs")
	return opsFlags{addr: addr, pprof: pp}
}
