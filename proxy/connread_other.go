//go:build !linux

package proxy

import (
	"io"
	"net"
)

// connReader returns conn: raw reads are Linux's (connread_linux.go).
func connReader(conn net.Conn) io.Reader { return conn }
