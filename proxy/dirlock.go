package proxy

import "github.com/replproxy/replproxy/streamlog"

// dir's lock (streamlog.LockDir: the lock file, its flock, its refusal)
// is held for the server's whole life, whatever the stream log's setting.
// New takes it before it touches any file in dir (the stream log, the
// snapshot on disk, spill leftovers), so that a second proxy on the same
// dir refuses to start instead of removing the files the first one serves
// from. CONFIG SET dir (only with the log off) moves it: the new dir's lock
// is taken first, and a dir another proxy holds is refused.

// swapDirLock makes l dir's lock and releases the one held before.
// REQUIRES: conf.writeMu held, or New before the server is shared.
func (s *Server) swapDirLock(l *streamlog.DirLock) {
	if s.dirLock != nil {
		s.io("unlock dir")
		s.dirLock.Close()
	}
	s.dirLock = l
}

// releaseDir releases dir's lock, once everything that writes in dir has
// stopped (Run's end, or Close on a server that never ran).
func (s *Server) releaseDir() {
	s.conf.writeMu.Lock()
	defer s.conf.writeMu.Unlock()
	s.swapDirLock(nil)
}
