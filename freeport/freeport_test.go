package freeport

import (
	"net"
	"strconv"
	"testing"
)

// The port is free, and below the kernel's range for outgoing
// connections where that range leaves room.
func TestListen(t *testing.T) {
	start := ephemeralStart()
	if start == 0 {
		t.Skip("no /proc/sys/net/ipv4/ip_local_port_range here")
	}
	for range 20 {
		ln, err := Listen()
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		if start-lowest >= 1000 && (port < lowest || port >= start) {
			t.Fatalf("port %d, want one in [%d, %d)", port, lowest, start)
		}
	}
}

// A port Port returned can be listened on.
func TestPort(t *testing.T) {
	port, err := Port()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatalf("port %d: %v", port, err)
	}
	ln.Close()
}
