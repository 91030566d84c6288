//go:build !unix

package rawconn

import "net"

// Wrap returns c unchanged: raw reads and writes are for Unix systems.
func Wrap(c net.Conn) net.Conn { return c }
