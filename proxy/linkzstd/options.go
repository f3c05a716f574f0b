package linkzstd

// The encoder's settings, chosen by the codec benchmark: BenchmarkEncoderSettings's
// comment gives the table of what was tried and why these.
const (
	encoderWindow = 1 << 20
	encoderLowMem = false
	// decoderMaxWindow bounds the window a peer's frame may declare, and
	// so the decoder's history: hostile input cannot make a Reader hold
	// more. Twice the Writer's, so that a peer with a larger window still
	// links.
	decoderMaxWindow = 8 << 20
)
