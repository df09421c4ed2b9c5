"""The forwarding core: bytes spliced between client and upstream as received.

One concept per module: :mod:`.head` (raw heads and the few rewrites a feature needs),
:mod:`.framing` (message boundaries from httptools reading a copy), :mod:`.upstream`
(upstream connections and their capped pool), :mod:`.client` (the client-side protocol: the
connection's state and flow control) with the parts of an exchange bound to it,
:mod:`.exchange` (its state), :mod:`.requests` (reading requests), :mod:`.binding` (its
upstream connection), :mod:`.responses` (reading answers) and :mod:`.endings` (recording,
tap answers, cuts, refusals); :mod:`.timeouts`, :mod:`.tracing`, :mod:`.answers` (the tap's
own answers), :mod:`.hop` (one hop's listener and drain).
"""
