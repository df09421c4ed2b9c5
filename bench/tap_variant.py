"""Run mcp-tap's proxy with one part switched off, to measure what that part costs.

Not a way to run mcp-tap: a profiling aid for ``bench/run.py`` (target ``tap-norecord``).

* ``--no-record``: ``Recorder.record`` does nothing, so no judging, redaction, metrics, log
  line or evidence; what is left is the forwarding path (headers, digests, SSE decoding).
* ``--batched-writer``: the evidence writer thread is not woken per record; it picks the
  records up when its 0.25 s poll times out (what batching its wake-ups would save).

Run: ``python bench/tap_variant.py --listen 127.0.0.1:9002 --upstream URL --evidence DIR``.
"""

from __future__ import annotations

import argparse
import asyncio
import queue
import signal
from dataclasses import replace
from typing import Any

from mcp_tap.logs import configure_logging
from mcp_tap.proxy import recorder
from mcp_tap.proxy.options import RecordingOptions, load_options
from mcp_tap.proxy.server import TapServer


class _QuietQueue(queue.Queue[Any]):
    """A queue whose ``put_nowait`` does not wake a waiting consumer."""

    def put_nowait(self, item: Any) -> None:
        with self.mutex:
            if 0 < self.maxsize <= self._qsize():
                raise queue.Full
            self._put(item)
            self.unfinished_tasks += 1


async def _serve(server: TapServer) -> None:
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    await server.start()
    try:
        await stop.wait()
    finally:
        await server.stop()


def main() -> None:
    """Parse the flags, patch, serve until SIGTERM."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--listen", required=True)
    p.add_argument("--upstream", required=True)
    p.add_argument("--evidence", required=True)
    p.add_argument("--log-level", default="info")
    p.add_argument("--no-record", action="store_true")
    p.add_argument("--batched-writer", action="store_true")
    args = p.parse_args()
    if args.no_record:
        recorder.Recorder.record = lambda self, cap: {}  # type: ignore[method-assign,assignment]
    options = load_options(
        None, listen=args.listen, upstream=args.upstream, evidence_dir=args.evidence, admin=""
    )
    # Inline: the patches above act on this process's recorder and writer.
    options = replace(options, recording=RecordingOptions(mode="inline"))
    configure_logging(args.log_level)
    server = TapServer(options)
    if args.batched_writer:
        server.writer._queue = _QuietQueue(maxsize=options.evidence.queue_size)
    asyncio.run(_serve(server))


if __name__ == "__main__":
    main()
