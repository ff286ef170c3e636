"""The command line: options defined once, one module per command, the doctor's fast path. The last stage."""
