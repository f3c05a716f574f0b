// Package rdbcheck walks an RDB payload as it arrives and refuses, at the
// first byte that betrays it, a payload that a Redis 7.x or Valkey 8
// replica would not load or would die loading: replicas exit on a corrupt
// RDB, so a snapshot must be checked before it is served, and a CRC-64
// trailer of zero (rdbchecksum no) checks nothing.
//
// # What is checked
//
// The walk mirrors Redis's loader (rdb.c's rdbLoadRioWithLoadingCtx and
// rdbLoadObject, at tag 7.0.15, with what 7.2, 7.4 and Valkey 8 add) as
// redis-check-rdb runs it, that is with deep sanitization: the contents
// of listpacks, ziplists, intsets and zipmaps are checked entry by entry,
// as sanitize-dump-payload yes does, not only their headers. It accepts a
// payload if and only if redis-check-rdb 7.0 (as Debian 12 ships 7.0.15,
// with the security fixes of 2026) and the loaders of the versions that
// write or read its version accept it, except where a rule below is
// stricter or a gap is stated.
//
//   - Header: "REDIS" and four characters read with atoi. Versions 1 to 10
//     (all that Redis 7.0 loads), 11 (Redis 7.2, Valkey 8) and 12 (Redis
//     7.4); any other is refused (ErrVersion).
//   - Opcodes: AUX, SELECTDB, RESIZEDB, EXPIRETIME, EXPIRETIME_MS, FREQ,
//     IDLE, MODULE_AUX (its "when" opcode must be UINT, then the module's
//     items), FUNCTION2, SLOT_INFO (version 12 only), EOF. The release
//     candidates' FUNCTION opcode (246) is refused, as 7.2 and later
//     refuse it (7.0 still converts it; no released Redis writes it).
//   - Lengths: 6, 14, 32 and 64 bits; 0x82 to 0xbf are refused; where Redis
//     compares a length with RDB_LENERR, a 64-bit length of all ones is
//     refused; where it reads a length with no encoding flag, a byte
//     11xxxxxx reads as its low six bits, as Redis reads it.
//   - Strings: raw, INT8/16/32, LZF (decoded with an 8 KiB window when its
//     bytes are needed, its operations' bounds checked when not; the
//     output must be exactly the announced length, with Redis's quirk that
//     a string announced empty is accepted whatever its compressed bytes);
//     other special encodings are refused.
//   - Values, of every type Redis 7.0 to 7.4 and Valkey 8 write: strings;
//     lists (linked, ziplist, quicklist of ziplists, quicklist 2 of packed
//     and plain nodes, whose container must be 1 or 2); sets (hash table,
//     intset, listpack from version 11); sorted sets (ZSET_2 with binary
//     scores and the old ZSET whose scores glibc's sscanf("%lg") must
//     read, no NaN; ziplist; listpack); hashes (hash table, zipmap,
//     ziplist, listpack; from version 12 the field-expiry types, GA and
//     release candidates', with their TTL rules); streams (listpacks 1, 2
//     and 3, with consumer groups, pending entries and consumers); module
//     values (MODULE_2) by their framing, as redis-check-rdb reads them.
//     The old MODULE type (6) is refused. A type newer than the payload's
//     version is refused, as the version's older readers refuse it.
//   - Within values: no empty value (redis-check-rdb refuses one; a
//     replica would skip it); no member, field, node key, group, consumer
//     or pending ID twice where Redis refuses that; a consumer's pending
//     ID must be its group's and no other consumer's (a check of the 2026
//     security releases, 7.2.15 and 7.4.10, which Debian's 7.0.15 has),
//     and (deep sanitization) every pending ID must have a consumer;
//     stream listpacks as streamValidateListpackIntegrity lays them out.
//   - The end: after EOF, the CRC-64 (from version 5) must be zero or
//     match; a byte after it is refused.
//
// # Stricter than redis-check-rdb
//
// redis-check-rdb only reads; a replica also builds. The walker refuses,
// beyond what redis-check-rdb 7.0 refuses:
//
//   - a key twice in one DB (a replica panics: "Duplicated key found in
//     RDB file");
//   - SLOT_INFO (version 12) for a slot past 16383 (a cluster-mode replica
//     indexes its array of slots with it);
//   - for versions Valkey 8 loads (up to 11), a "slot-info" aux value that
//     Valkey's sscanf("%i,%lu,%lu") does not read, and a
//     "cluster-slot-states" value its cluster-mode parser refuses;
//   - the 7.0 release candidates' function format (above);
//   - a sorted set listpack or ziplist with a NaN score (as a string that
//     strtod reads so) whatever its size: a replica converting it to a
//     skiplist fails an assertion, at load when it has more members than
//     zset-max-listpack-entries, which redis-check-rdb refuses past the
//     default 128 and the walker cannot know;
//   - a zipmap length written in five bytes whose value is below 254,
//     where Redis's check and its loader read the zipmap differently;
//   - a byte after the checksum (the walker's contract; Redis stops
//     reading there).
//
// # Memory
//
// The walk's state does not depend on the payload's size or on the
// lengths it claims: it reads each byte once and builds no value. It holds
// an LZF window (8 KiB), a few small buffers, and the duplicate checks'
// sets of 64-bit hashes, each a table allocated when first needed, small,
// and doubled as it fills up to its bound: keys by DB (16384 remembered,
// 256 KiB and 32 KiB), the members of one value or a stream's node keys
// (4096, 64 KiB and 8 KiB to clear it), and for streams the groups (128),
// one group's consumers (256), its pending IDs (2048, 32 KiB) and one
// consumer's pending IDs (1024, 16 KiB): 450 KiB at most, with the walk's
// goroutine stack, and less than 1 MiB allocated over a walk. Past the
// sets' growth, values cost no allocation.
//
// # The gaps
//
// What the walker does not check, and why:
//
//   - Duplicates past the bounds above: once a set is full, a later entry
//     is still looked up among those remembered, but not remembered; so a
//     duplicate of which neither copy was remembered goes unseen (in a
//     value of more than 4096 members, a DB of more than 16384 keys, a
//     group of more than 2048 pending IDs). Refusing instead would refuse
//     valid payloads, which stops replication; Redis never writes such a
//     duplicate. Two different strings whose 64-bit hashes (hash/maphash,
//     seeded per walk) collide would be taken for a duplicate: about one
//     chance in 2^35 for a full set of keys.
//   - Likewise for pending IDs: a consumer's ID not found among its
//     group's remembered IDs is let through once that set is full; every
//     remembered ID must still have a consumer.
//   - Function libraries (FUNCTION2) are read as strings, as
//     redis-check-rdb reads them; a replica compiles them (Lua) and
//     refuses one that does not compile or whose name it already has.
//   - Module values and MODULE_AUX are walked by their framing, passing
//     over opcodes it does not know, as redis-check-rdb does; a replica
//     needs the module itself, which may refuse the value, and refuses the
//     value outright without the module.
//   - SELECTDB's index is not checked against the replicas' databases
//     setting (a replica exits on an index of that many or more), which
//     the walker does not know. RESIZEDB's and SLOT_INFO's size hints are
//     not bounded: a replica sizes its tables by them, but Redis's
//     allocator maps a table lazily and a replica loads any hint (7.0.15
//     was tried with 2^40 and 2^64-2 keys); one whose kernel does not
//     overcommit memory (vm.overcommit_memory=2) may abort on a large one.
//   - An empty value is refused as redis-check-rdb refuses it, although a
//     replica skips it.
//   - A "cluster-slot-states" aux key with a NUL after its 19 bytes: Valkey
//     finds it or not by a hash seeded at random, so its value is not
//     checked.
//
// # Errors and offsets
//
// Every fault is a *CorruptError whose Offset is the byte where the
// payload went wrong: the byte whose reading made the fault certain (for a
// wrong checksum, its last byte; for a listpack whose count is wrong, its
// final 0xff). Every byte before it was accepted, and the verdict and the
// offset do not depend on how the payload is cut into Writes. Err
// classifies ErrChecksum, ErrVersion and, from Close, io.ErrUnexpectedEOF.
//
// # Concurrency
//
// A Walker is used by one goroutine. The walk itself runs as a coroutine
// (iter.Pull): Write hands it the bytes and resumes it, and it yields back
// when it has used them up, so it reads the payload as a plain reader
// while Write stays synchronous. Close stops it; a Walker dropped without
// Close is stopped when the garbage collector finds it unreachable
// (runtime.AddCleanup), since the walk holds nothing of the Walker.
//
// Example:
//
//	w := rdbcheck.NewWalker()
//	for chunk := range payload {
//		n, err := w.Write(chunk)
//		publish(chunk[:n]) // what Write accepted
//		if err != nil {
//			return err // a *CorruptError: fail the snapshot
//		}
//	}
//	return w.Close() // nil only if the RDB ended, checksum and all
package rdbcheck
