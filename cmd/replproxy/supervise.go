package main

import (
	"os"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/proxy"
	"github.com/replproxy/replproxy/proxy/config"
)

// supervisor returns what tells systemd of the proxy's life under
// supervised mode, as redis-server 7.0 does: systemd, or auto with
// NOTIFY_SOCKET set in the environment, notifies systemd (a unit of
// Type=notify waits for READY=1); no, or auto without NOTIFY_SOCKET,
// returns nil. systemd asked for without NOTIFY_SOCKET warns, as Redis
// does, and notifies nothing.
func supervisor(mode config.Supervised, log hclog.Logger) proxy.Supervisor {
	socket := os.Getenv("NOTIFY_SOCKET")
	switch {
	case mode == config.SupervisedNo, mode == config.SupervisedAuto && socket == "":
		return nil
	case socket == "":
		log.Warn("supervised systemd, but NOTIFY_SOCKET is not set: systemd is not notified", "supervised", string(mode))
		return nil
	}
	log.Info("supervised by systemd: readiness goes to NOTIFY_SOCKET", "supervised", string(config.SupervisedSystemd))
	return systemdNotifier{log: log}
}

// systemdNotifier sends sd_notify(3) messages to NOTIFY_SOCKET. It holds no
// state: each message is one datagram on a socket of its own.
type systemdNotifier struct {
	log hclog.Logger
}

func (n systemdNotifier) Ready(status string) {
	n.send(daemon.SdNotifyReady + "\nSTATUS=" + status)
}

func (n systemdNotifier) Status(status string) { n.send("STATUS=" + status) }

func (n systemdNotifier) Stopping() {
	n.send(daemon.SdNotifyStopping + "\nSTATUS=Shutting down")
}

// send writes state; a failure is logged and otherwise ignored: systemd
// then times the start out or sees the process exit, and the proxy keeps
// serving either way.
func (n systemdNotifier) send(state string) {
	if _, err := daemon.SdNotify(false, state); err != nil {
		n.log.Warn("cannot notify systemd", "error", err)
	}
}
