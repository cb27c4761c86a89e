"""Pure domain rules: attrs values, no I/O, no HTTP."""
