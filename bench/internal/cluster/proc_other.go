//go:build !linux

package cluster

import (
	"os"
	"syscall"
)

var sigterm = os.Interrupt

func sysProcAttr() *syscall.SysProcAttr { return nil }
