//go:build linux && cgo

package main

/*
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

// fwd_listen listens on addr:port (network byte order); -errno on failure.
static int fwd_listen(uint32_t addr, uint16_t port) {
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) return -errno;
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	struct sockaddr_in sa;
	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = addr;
	sa.sin_port = port;
	if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 128) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	return fd;
}

static int fwd_add(int ep, int fd, uint64_t data) {
	struct epoll_event ev;
	memset(&ev, 0, sizeof ev);
	ev.events = EPOLLIN;
	ev.data.u64 = data;
	return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
}

// fwd_loop serves n listeners (fds lfds, each one's connections going to
// uaddr/uport, network byte order) until one fails, and returns -errno.
// Level-triggered, blocking sockets: a readable connection is read once,
// up to 16 KiB, and what it gave is sent whole to its peer.
static int fwd_loop(const int *lfds, const uint32_t *uaddr, const uint16_t *uport, int n) {
	enum { maxfd = 1 << 16 };
	int ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0) return -errno;
	int *peer = malloc(maxfd * sizeof(int));
	if (!peer) return -ENOMEM;
	for (int i = 0; i < maxfd; i++) peer[i] = -1;
	for (int i = 0; i < n; i++)
		if (fwd_add(ep, lfds[i], (1ULL << 32) | (uint64_t)i) < 0) return -errno;
	static char buf[16384];
	struct epoll_event evs[64];
	for (;;) {
		int k = epoll_wait(ep, evs, 64, -1);
		if (k < 0) {
			if (errno == EINTR) continue;
			return -errno;
		}
		for (int i = 0; i < k; i++) {
			uint64_t d = evs[i].data.u64;
			if (d >> 32) {
				int li = (int)(d & 0xffffffffu);
				int c = accept4(lfds[li], NULL, NULL, SOCK_CLOEXEC);
				if (c < 0) {
					if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED) continue;
					return -errno;
				}
				int u = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
				struct sockaddr_in sa;
				memset(&sa, 0, sizeof sa);
				sa.sin_family = AF_INET;
				sa.sin_addr.s_addr = uaddr[li];
				sa.sin_port = uport[li];
				if (u < 0 || u >= maxfd || c >= maxfd || connect(u, (struct sockaddr *)&sa, sizeof sa) < 0) {
					if (u >= 0) close(u);
					close(c); // the client sees its link end, as behind a relay whose upstream is down
					continue;
				}
				int one = 1;
				setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
				setsockopt(u, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
				if (fwd_add(ep, c, (uint64_t)c) < 0 || fwd_add(ep, u, (uint64_t)u) < 0) return -errno;
				peer[c] = u;
				peer[u] = c;
				continue;
			}
			int fd = (int)d, p = peer[fd];
			if (p < 0) continue; // closed with its peer earlier in this batch
			ssize_t m = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
			if (m < 0 && (errno == EAGAIN || errno == EINTR)) continue;
			ssize_t off = 0;
			while (m > 0 && off < m) {
				ssize_t w = send(p, buf + off, (size_t)(m - off), MSG_NOSIGNAL);
				if (w < 0 && errno == EINTR) continue;
				if (w <= 0) break;
				off += w;
			}
			if (m <= 0 || off < m) {
				epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
				epoll_ctl(ep, EPOLL_CTL_DEL, p, NULL);
				close(fd);
				close(p);
				peer[fd] = peer[p] = -1;
			}
		}
	}
}
*/
import "C"

import (
	"encoding/binary"
	"fmt"
	"net"
	"syscall"
)

// forwardServe runs the forwarder's event loop, in C on the calling
// thread, until a listener fails: the loop never returns to Go, so that
// the Go runtime's scheduler, poller and monitor thread take no part in
// it (a cgo call the runtime sees as one long system call). Per packet it
// makes one epoll_wait, one recv and one send, as an event-driven relay
// such as redis-server does; it needs the C toolchain that the race
// detector's builds need too.
func forwardServe(routes []forwardRoute) error {
	n := len(routes)
	lfds := make([]C.int, n)
	uaddr := make([]C.uint32_t, n)
	uport := make([]C.uint16_t, n)
	for i, r := range routes {
		la, lp, err := inet4(r.listen)
		if err != nil {
			return err
		}
		fd := C.fwd_listen(la, lp)
		if fd < 0 {
			return fmt.Errorf("forward: listen %s: %w", r.listen, syscall.Errno(-fd))
		}
		lfds[i] = fd
		if uaddr[i], uport[i], err = inet4(r.upstream); err != nil {
			return err
		}
	}
	rc := C.fwd_loop(&lfds[0], &uaddr[0], &uport[0], C.int(n))
	return fmt.Errorf("forward: %w", syscall.Errno(-rc))
}

// inet4 is addr's IPv4 address and port in network byte order, as the C
// side puts them in a sockaddr_in.
func inet4(addr string) (C.uint32_t, C.uint16_t, error) {
	a, err := net.ResolveTCPAddr("tcp4", addr)
	if err != nil {
		return 0, 0, fmt.Errorf("forward: %w", err)
	}
	ip := a.IP.To4()
	if ip == nil {
		return 0, 0, fmt.Errorf("forward: %s is not IPv4", addr)
	}
	var port [2]byte
	binary.BigEndian.PutUint16(port[:], uint16(a.Port))
	return C.uint32_t(binary.NativeEndian.Uint32(ip)), C.uint16_t(binary.NativeEndian.Uint16(port[:])), nil
}

// forwardKind is how the report names this forwarder.
const forwardKind = "one thread's event loop in C (epoll_wait, recv, send per packet, as redis-server's loop)"
