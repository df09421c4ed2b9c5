"""Instructions per request of the tap's forwarding process, under callgrind.

CPU time per request swings with the machine's load; an instruction count does not. This
starts the benchmark origin and the tap (``mcp-tap proxy``, recording in its own process),
runs the forwarding process under ``valgrind --tool=callgrind --instr-atstart=no`` (the
recording process is not traced), warms it up, then counts instructions while ``wrk`` sends
``--seconds`` of JSON requests and again while it idles as long, and prints
``(load - idle) / requests``. Each measured window is zeroed and dumped with
``callgrind_control``; the dumps stay in ``--out`` for ``callgrind_annotate``.

Run: ``.venv/bin/python bench/callgrind_forwarder.py`` (about a minute).

``--splice``: the forwarding core alone, in-process (``bench/micro.py --splice``'s set-up:
a real client connection and pooled upstream connection of a hop, fake transports, the real
hand-off batch and frame; no sockets, no event loop), ``--exchanges`` of them in batches of
8, counted between two ``callgrind_control`` toggles, with a fixed hash seed: the same
count on every run, however busy the machine (with ``--kind sse``, ``--split`` reads the
answer one event at a time, as a stream comes).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from run import JSON_CALL, PY, SSE_CALL, Service, free_port, lua_script, start  # noqa: E402


def _control(pid: int, *args: str) -> None:
    subprocess.run(["callgrind_control", *args, str(pid)], check=True, capture_output=True)


def _window(pid: int, out: Path, label: str, work: float | list[str]) -> tuple[int, str]:
    """Instructions of one window (a sleep of ``work`` seconds, or a command), and its
    command's output."""
    before = set(out.glob("callgrind.out.*"))
    _control(pid, "-z")
    _control(pid, "-i", "on")
    text = ""
    if isinstance(work, float):
        time.sleep(work)
    else:
        text = subprocess.run(work, capture_output=True, text=True, check=True).stdout
    _control(pid, "-i", "off")
    _control(pid, "-d", label)
    for _ in range(100):
        new = set(out.glob("callgrind.out.*")) - before
        if new:
            break
        time.sleep(0.1)
    dump = max(new, key=lambda p: p.stat().st_mtime)
    for _ in range(100):  # "totals:" is the dump's last line
        totals = re.search(r"^totals: (\d+)", dump.read_text(errors="replace"), re.M)
        if totals is not None:
            return int(totals.group(1)), text
        time.sleep(0.1)
    raise RuntimeError(f"no totals in {dump}")


def _splice_child(kind: str, split: bool, exchanges: int, distinct: int) -> None:
    """(Under callgrind) splice ``exchanges`` in-process, instrumented only meanwhile."""
    import asyncio
    import os

    from micro import splice_exchanges, splice_set_up

    from mcp_tap.proxy.options import load_options

    async def run() -> None:
        opts = load_options(None, env={}, listen="127.0.0.1:0",
                            upstream="http://127.0.0.1:9001")
        hop, recorder, _ = await splice_set_up(opts)
        exchange = splice_exchanges(hop, recorder, JSON_CALL if kind == "json" else SSE_CALL,
                                    split, distinct)
        for _ in range(max(10, distinct // 8)):  # warm: parsers, pool, the interpreter
            exchange(8)
        _control(os.getpid(), "-i", "on")
        for _ in range(exchanges // 8):
            exchange(8)
        _control(os.getpid(), "-i", "off")

    asyncio.run(run())


def _splice(args: argparse.Namespace) -> None:
    """Instructions per exchange of the forwarding core in-process (see ``--splice``)."""
    exchanges = args.exchanges // 8 * 8
    cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no",
           "--callgrind-out-file=/dev/null", PY, __file__, "--splice-child", "--kind",
           args.kind, "--exchanges", str(exchanges)]
    if args.split:
        cmd.append("--split")
    if args.distinct_heads:
        cmd += ["--distinct-heads", str(args.distinct_heads)]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env).stderr
    collected = re.search(r"Collected : (\d+)", out)
    if collected is None:
        raise RuntimeError(out[-2000:])
    shape = " (one event per read)" if args.split else ""
    if args.distinct_heads:
        shape += f" (heads cycled through {args.distinct_heads} distinct)"
    print(f"{args.kind}{shape} in-process: {exchanges} exchanges; "
          f"{int(collected[1]) / exchanges / 1000:.1f}k instructions per exchange")


def main() -> None:
    """Measure and print instructions per request."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=int, default=10)
    p.add_argument("--connections", type=int, default=8)
    p.add_argument("--kind", choices=("json", "sse"), default="json")
    p.add_argument("--uvloop", action="store_true",
                   help="the tap on uvloop (its default when installed); else asyncio's loop")
    p.add_argument("--out", type=Path, help="keep the dumps here (default: a temp directory)")
    p.add_argument("--splice", action="store_true",
                   help="count the forwarding core in-process instead (see the docstring)")
    p.add_argument("--split", action="store_true",
                   help="with --splice --kind sse: one event per read")
    p.add_argument("--exchanges", type=int, default=2000, help="with --splice")
    p.add_argument("--distinct-heads", type=int, default=0, metavar="N",
                   help="with --splice: cycle through N exchanges whose heads all differ "
                        "(e.g. 1024, more than the forwarder's head memos keep); default: "
                        "one exchange repeated")
    p.add_argument("--splice-child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.splice_child:
        _splice_child(args.kind, args.split, args.exchanges, args.distinct_heads)
        return
    if args.splice:
        _splice(args)
        return
    tmp = Path(tempfile.mkdtemp(prefix="tap-callgrind-"))
    out = args.out or tmp
    out.mkdir(parents=True, exist_ok=True)
    call = JSON_CALL if args.kind == "json" else SSE_CALL
    origin_port, tap_port = free_port(), free_port()
    origin = start("origin", [PY, str(HERE / "origin.py"), "--port", str(origin_port)],
                   origin_port, tmp)
    mcp_tap = str(Path(PY).parent / "mcp-tap")
    cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--trace-children=no",
           f"--callgrind-out-file={out}/callgrind.out.%p", PY, mcp_tap, "proxy",
           "--listen", f"127.0.0.1:{tap_port}", "--upstream", f"{origin.url}".rsplit("/", 1)[0],
           "--evidence", str(tmp / "ev"), "--log-level", "info"]
    cmd += ["--uvloop"] if args.uvloop else ["--loop", "asyncio"]
    tap: Service | None = None
    try:
        tap = start("tap", cmd, tap_port, tmp)
        pid = tap.proc.pid
        script = str(lua_script(call, tmp))
        url = f"http://127.0.0.1:{tap_port}/mcp"
        wrk = ["wrk", "-t1", f"-c{args.connections}", "--timeout", "10s", "-s", script]
        subprocess.run([*wrk, "-d3s", url], capture_output=True, check=True)  # warm-up
        load, text = _window(pid, out, "load", [*wrk, f"-d{args.seconds}s", url])
        idle, _ = _window(pid, out, "idle", float(args.seconds))
        line = next(ln for ln in text.splitlines() if ln.startswith("BENCH "))
        summary = json.loads(line[6:])
        requests = summary["requests"]
        errors = summary["errors"] + summary["non2xx"]
        per = (load - idle) / max(1, requests)
        print(f"{args.kind} c={args.connections} {'uvloop' if args.uvloop else 'asyncio'}: "
              f"{requests} requests ({errors} errors), load {load} idle {idle} "
              f"instructions; {per / 1000:.1f}k instructions per request; dumps in {out}")
    finally:
        if tap is not None:
            tap.stop(60)
        origin.stop()


if __name__ == "__main__":
    main()
