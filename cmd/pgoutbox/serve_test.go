package main

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/pgoutbox/pgoutbox/relay"
)

// The profiles are served only when asked for; /metrics is served either way.
func TestServeOpsPprofOnlyWhenAsked(t *testing.T) {
	for _, withPprof := range []bool{false, true} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		stop, err := serveOps(addr, withPprof, relay.NewMetrics(new(atomic.Int64), nil).Handler(), slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		for path, want := range map[string]int{
			"/metrics":                  http.StatusOK,
			"/debug/pprof/":             map[bool]int{false: http.StatusNotFound, true: http.StatusOK}[withPprof],
			"/debug/pprof/heap?debug=1": map[bool]int{false: http.StatusNotFound, true: http.StatusOK}[withPprof],
		} {
			resp, err := http.Get("http://" + addr + path)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("pprof %v: GET %s: %d, want %d", withPprof, path, resp.StatusCode, want)
			}
		}
		stop()
	}
}
