package rdbcheck

// A module's value (type MODULE_2) or aux data is a sequence of typed
// items, each after its opcode, up to the EOF opcode:
//
//	<opcode> (SINT/UINT: <length> | FLOAT: 4 bytes | DOUBLE: 8 bytes | STRING: <string>)
//
// A replica needs the module to load it, which the walker cannot know it
// has; it walks the framing as redis-check-rdb does (rdbLoadCheckModuleValue),
// which also passes over an opcode it does not know.

// moduleValue reads a module's items up to the EOF opcode.
func (w *walk) moduleValue() error {
	for {
		op, err := w.lengthAny()
		if err != nil {
			return err
		}
		switch op {
		case moduleOpEOF:
			return nil
		case moduleOpSInt, moduleOpUInt:
			_, err = w.lengthAny()
		case moduleOpString:
			err = w.skipString()
		case moduleOpFloat:
			err = w.in.skip(4)
		case moduleOpDouble:
			err = w.in.skip(8)
		}
		if err != nil {
			return err
		}
	}
}

// moduleAux reads MODULE_AUX: the module's id, the "when" opcode (which
// must be UINT) and value, then the module's items.
func (w *walk) moduleAux() error {
	var v [3]uint64
	for i := range v {
		n, err := w.length()
		if err != nil {
			return err
		}
		v[i] = n
	}
	if v[1] != moduleOpUInt {
		return w.fail("bad when_opcode")
	}
	return w.moduleValue()
}
