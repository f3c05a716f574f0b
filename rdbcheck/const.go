package rdbcheck

// The RDB format's numbers, as Redis's rdb.h defines them: wire format; do
// not change.

// Versions the walker accepts: every version Redis 7.0 loads (1 to 10), the
// version of Redis 7.2 and Valkey 8 (11) and that of Redis 7.4 (12).
const (
	minVersion = 1
	maxVersion = 12

	// versionChecksum is the first version whose RDB ends with a CRC-64.
	versionChecksum = 5
	// versionSetListpack is Redis 7.2's (and Valkey 8's) version: set
	// listpacks and stream listpacks v3 appear.
	versionSetListpack = 11
	// versionHashTTL is Redis 7.4's version: hash field expiry and the
	// SLOT_INFO opcode appear.
	versionHashTTL = 12
)

// Opcodes, read where a value type may be.
const (
	opSlotInfo     = 244 // Redis 7.4: slot id, slot size, expires slot size
	opFunction2    = 245 // a function library's code
	opFunctionPre  = 246 // 7.0-rc1 and rc2's function format
	opModuleAux    = 247 // module data outside the key space
	opIdle         = 248 // LRU idle time of the next key
	opFreq         = 249 // LFU frequency of the next key
	opAux          = 250 // an aux field: two strings
	opResizeDB     = 251 // hash table size hints of the selected DB
	opExpireTimeMS = 252 // expire time of the next key, in milliseconds
	opExpireTime   = 253 // expire time of the next key, in seconds
	opSelectDB     = 254 // the DB of the keys that follow
	opEOF          = 255 // the end, then the checksum
)

// Value types.
const (
	typeString            = 0
	typeList              = 1
	typeSet               = 2
	typeZset              = 3
	typeHash              = 4
	typeZset2             = 5 // doubles in binary
	typeModulePre         = 6 // 4.0 release candidates' module format
	typeModule2           = 7
	typeHashZipmap        = 9
	typeListZiplist       = 10
	typeSetIntset         = 11
	typeZsetZiplist       = 12
	typeHashZiplist       = 13
	typeListQuicklist     = 14
	typeStreamListpacks   = 15
	typeHashListpack      = 16
	typeZsetListpack      = 17
	typeListQuicklist2    = 18
	typeStreamListpacks2  = 19
	typeSetListpack       = 20
	typeStreamListpacks3  = 21
	typeHashMetadataPre   = 22 // 7.4 release candidates: absolute field TTLs
	typeHashListpackExPre = 23
	typeHashMetadata      = 24
	typeHashListpackEx    = 25
)

// Lengths: the two high bits of the first byte.
const (
	len6Bit  = 0
	len14Bit = 1
	len32Bit = 0x80
	len64Bit = 0x81
	lenEnc   = 3 // a special string encoding follows in the low six bits
)

// String encodings, after a first byte of 11xxxxxx.
const (
	encInt8  = 0
	encInt16 = 1
	encInt32 = 2
	encLZF   = 3
)

// Module value opcodes.
const (
	moduleOpEOF    = 0
	moduleOpSInt   = 1
	moduleOpUInt   = 2
	moduleOpFloat  = 3
	moduleOpDouble = 4
	moduleOpString = 5
)

// Quicklist node containers (quicklist.h).
const (
	containerPlain  = 1
	containerPacked = 2
)

// Stream entry flags (t_stream.c).
const (
	streamFlagSameFields = 1 << 1
)

// streamIDSize is a stream ID's size: two 64-bit numbers, big-endian.
const streamIDSize = 16

// Hash field expiry (ebuckets.h): the largest expire time, and the value
// that says "no field has one".
const (
	expireTimeMax     = 1<<48 - 1
	expireTimeInvalid = expireTimeMax + 1
)

// clusterSlots is the number of hash slots of a cluster.
const clusterSlots = 16384

// lenErr is what Redis's rdbLoadLen returns on an error: a 64-bit length of
// all ones reads as an error wherever Redis compares with RDB_LENERR.
const lenErr = ^uint64(0)
