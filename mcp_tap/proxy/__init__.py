"""The recording proxy: a thin aiohttp shell around the conformance core.

``forward`` moves bytes, ``capture`` keeps bounded copies and digests, ``recorder`` judges
finished exchanges with the core, redacts them and hands them to the evidence writer,
``correlate`` pairs exchanges across hops, ``admin`` serves health and metrics, ``server``
wires it together and drains on SIGTERM.
"""
