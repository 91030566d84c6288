// Package freeport finds free TCP ports on the loopback interface for
// servers that are stopped and started again on the same address (a
// throwaway PostgreSQL, a Kafka broker).
//
// A port the kernel picks for a listener on port 0 comes from its
// ephemeral range, the same range it hands out as the local port of every
// outgoing connection: in the moment a server on such a port is stopped,
// any client's connection may take the port, and the restart fails with
// "address already in use". Ports below that range are never handed out
// so, and only another listener can take them.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
)

// lowest is the lowest port Listen picks: above the well-known and most
// registered services' ports.
const lowest = 10000

// Listen listens on a free loopback port below the kernel's ephemeral
// range, picked at random, or, when that range leaves too few ports below
// it or none of the tries is free, on one the kernel picks. The caller
// reads the port and closes the listener before the server binds it.
func Listen() (net.Listener, error) {
	if start := ephemeralStart(); start-lowest >= 1000 {
		for range 50 {
			port := lowest + rand.IntN(start-lowest)
			if ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
				return ln, nil
			}
		}
	}
	return net.Listen("tcp", "127.0.0.1:0")
}

// Port returns a loopback port that was free a moment ago (see Listen).
func Port() (int, error) {
	ln, err := Listen()
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if err := ln.Close(); err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	return port, nil
}

// ephemeralStart is the first port of the kernel's ephemeral range, or 0
// where it cannot be read (not Linux).
func ephemeralStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	var lo, hi int
	if _, err := fmt.Sscan(string(b), &lo, &hi); err != nil {
		return 0
	}
	return lo
}
