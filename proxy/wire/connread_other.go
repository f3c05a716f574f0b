//go:build !linux

package wire

import (
	"io"
	"net"
)

// ConnReader returns conn: raw reads are Linux's (connread_linux.go).
func ConnReader(conn net.Conn) io.Reader { return conn }

// RawReadConn returns conn: raw reads are Linux's (connread_linux.go).
func RawReadConn(conn net.Conn) net.Conn { return conn }
