// Package cachedata generates a replication stream that looks like a real
// cache's, deterministically from a seed, so that every measurement of the
// compressed link (the codec benchmark, the cross-region bench, the tests)
// runs on the same data and its ratio means something.
//
// # The data's shape
//
// Each command is drawn at random (math/rand/v2's PCG, seeded) from four
// kinds, in these shares:
//
//   - ~40% JSON documents, SET <key> <json> with EX 3600 on half of them:
//     user and product objects of 300 B to 3 KiB with realistic field names,
//     numeric and hex ids, RFC 3339 timestamps, e-mail addresses, prices,
//     nested arrays of tags, addresses and order lines (keys user:<id>,
//     product:<id>).
//   - ~25% session hashes, HSET session:<32 hex> with 6 to 12 fields drawn
//     from user_id, csrf, created_at, last_seen, ip, user_agent, locale,
//     cart_items, theme, flags, ttl, referrer (values as a web framework
//     stores them).
//   - ~25% short strings, SET: a 32-hex token, a feature flag (on/off/
//     true/false/a variant name), a small number, a cached status (keys
//     token:<id>, flag:<name>:<id>, rate:<id>, status:<id>).
//   - ~10% counters: INCRBY counter:<name>:<id> <1..100>, every fourth one
//     followed by EXPIRE <key> 86400.
//
// Ids come from a skewed key space: 80% of the draws from the hottest 2%
// of 1,000,000 ids, the rest uniform, so that keys repeat as a cache's do.
// Every command is encoded as a RESP array of bulk strings, exactly as a
// primary writes it to its replicas (no SELECT: database 0).
//
// By bytes (seed 1, 100,000 commands): documents 72%, session hashes 23%,
// short strings 3%, counters 1.5%; a command is 440 B on average, a
// document 816 B, a session hash 419 B.
//
// # Concurrency
//
// A Gen is owned by one goroutine; it holds no lock and no global state
// (two Gens with one seed yield the same commands).
package cachedata
