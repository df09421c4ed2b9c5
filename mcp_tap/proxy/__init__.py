"""The recording proxy: a byte-splicing forwarding core around the conformance core.

``splice`` moves bytes (an ``asyncio.Protocol`` per connection, httptools reading a copy for
message boundaries), ``capture`` keeps bounded raw copies, ``recorder`` turns them into judged,
redacted records for the evidence writer (inline or in the recording process, ``worker``),
``correlate`` pairs exchanges across hops, ``admin`` serves health and metrics (aiohttp),
``server`` wires it together and drains on SIGTERM.
"""
