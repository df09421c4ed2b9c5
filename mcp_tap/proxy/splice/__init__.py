"""The forwarding core: bytes spliced between client and upstream as received.

One concept per module: :mod:`.head` (raw heads and the few rewrites a feature needs),
:mod:`.framing` (message boundaries from httptools reading a copy; each hop's head memos),
:mod:`.upstream` (upstream connections and their capped pool), :mod:`.state` (an exchange's
phases and the transition table), :mod:`.exchange` (its state), and the client connection:
:mod:`.client` (``ClientConnection``, the protocol callbacks) made of the parts in
:mod:`.requests`, :mod:`.binding`, :mod:`.responses` and :mod:`.endings` over
:mod:`.base` (their shared state); :mod:`.timeouts`, :mod:`.tracing`, :mod:`.answers` (the
tap's own answers), :mod:`.hop` (one hop's listener and drain).
"""
