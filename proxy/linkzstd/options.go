package linkzstd

// The encoder's settings, chosen by the codec benchmark: BenchmarkEncoderSettings's
// comment gives the table of what was tried and why these.
const (
	// encoderWindow is at least MaxChunkRaw: the encoder's block is the
	// smaller of 128 KiB and its window, and a chunk is one block.
	encoderWindow = 256 << 10
	encoderLowMem = true
	// decoderMaxWindow bounds the window a peer's frame may declare, and
	// so the decoder's history: hostile input cannot make a Reader hold
	// more. Far above the Writer's, so that a peer with a larger window
	// (an older replproxy's 1 MiB) still links.
	decoderMaxWindow = 8 << 20
)
