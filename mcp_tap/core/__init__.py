"""The sans-IO conformance core: bytes and objects in, findings out; no sockets, files or clocks."""
