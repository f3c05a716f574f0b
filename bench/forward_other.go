//go:build !linux || !cgo

package main

func forwardServe(routes []forwardRoute) error { return forwardCopy(routes, spliced) }

// forwardKind is how the report names this forwarder.
const forwardKind = "Go's io.Copy between the sockets (spliced by the kernel), a goroutine each way"
