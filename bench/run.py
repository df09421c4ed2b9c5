"""Benchmark mcp-tap against the same origin reached directly, interleaved in one run.

Processes (each its own, so no two share an event loop or a GIL):

* the origin: ``bench/origin.py`` (a minimal aiohttp MCP-shaped server), or the real SDK
  server with ``--origin sdk``;
* ``mcp-tap proxy`` with recording and checks on (evidence to a temporary directory,
  default options: judging and evidence in its recording process), the same with
  ``[recording] mode = "inline"`` (target ``tap-inline``) and with ``--uvloop``
  (target ``tap-uvloop``);
* ``bench/bare.py``: a bare aiohttp forwarder, no recording (target ``bare``), the floor
  an aiohttp-based proxy stands on;
* nginx (target ``nginx``, ``/usr/sbin/nginx`` or ``--nginx``): a reverse proxy with
  keep-alive upstream connections and buffering off, the physical-limit anchor;
* the load generator: ``wrk`` (one thread, a Lua script POSTs the MCP request), or
  ``bench/client.py load`` when wrk is missing or ``--loadgen python``.

Throughput: for each answer kind (``json``: tools/list; ``sse``: tools/call answered with
three SSE events) and each concurrency, rounds of ``--seconds`` alternate the targets
(direct, tap, tap-uvloop, bare, then the reverse order in the next round, ...). Reported:
the median over rounds of requests/s, p50 and p99, and the medians of the per-round ratio
to the direct run of the same round and of the per-round added p50.

First SSE event: ``bench/client.py first-event`` on one connection, against an origin
that waits ``--gap-ms`` between events, so a proxy that held events back would show it.

Memory: the tap's RSS (``/proc/PID/status`` VmRSS) is sampled while a ``--body-mb`` request
body, a ``--body-mb`` response body and a ``--stream-seconds`` SSE stream (``--long``: 10
minutes) pass through it; start, peak and end are reported.

Run: ``.venv/bin/python bench/run.py`` (about 8 minutes), ``--quick`` (about 1 minute).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from workload import (  # noqa: E402
    JSON_CALL,
    SSE_CALL,
    UPLOAD_HEADERS,
    Call,
    long_call,
    sse_call,
    tools_call,
    workload_headers,
)

PY = sys.executable
CLK_TCK = os.sysconf("SC_CLK_TCK")
MiB = 1024 * 1024
ALL_TARGETS = (
    "direct",
    "tap",
    "tap-inline",
    "tap-uvloop",
    "tap-asyncio",
    "bare",
    "tap-quiet",
    "tap-norecord",
    "tap-batched",
    "tap-before",
    "bare-uvloop",
    "nginx",
)
DEFAULT_TARGETS = ("direct", "tap", "tap-inline", "bare")
# tap: the defaults, [recording] mode = "process" (judging and evidence in a recording process).
# tap-inline: [recording] mode = "inline" (judging and evidence on the forwarding event loop).
# tap-uvloop: the tap on uvloop (--uvloop; the default when uvloop is installed).
# tap-asyncio: the tap on asyncio's own loop (--loop asyncio; the default without uvloop).
# tap-quiet: --log-level warning (no per-exchange log line).
# tap-norecord / tap-batched: bench/tap_variant.py, recording switched off / the evidence
# writer woken in batches (profiling aids: what recording and per-record wake-ups cost).
# tap-before: the mcp_tap package found under --before-root (e.g. a copy of the code before a
# change), for an interleaved before/after comparison in one run.

# Targets the issue sets for mcp-tap with recording and checks on (issue 10's table).
TARGET_RATIO_C32 = 0.5
TARGET_ADDED_P50_MS = 0.2
TARGET_ADDED_FIRST_EVENT_MS = 0.3
TARGET_FORWARD_CPU_US = 70.0
TARGET_RECORD_CPU_US = 120.0
FLAT_MIB = 32.0  # peak - start RSS that still counts as flat (capture caps are 1 MiB + events)


# -- processes --------------------------------------------------------------------------


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 90.0) -> None:
    """Wait until ``port`` accepts connections (bounded); fail if ``proc`` died."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args!r} exited with {proc.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise RuntimeError(f"port {port} not ready after {timeout} s")


@dataclass
class Service:
    """One process the bench started."""

    name: str
    port: int
    proc: subprocess.Popen[bytes]
    log: Path
    evidence: Path | None = None
    admin_port: int | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def cpu_s(self, children: bool = True) -> float:
        """CPU seconds (user + system, all threads) the process and its children used so far.

        The children count: with ``[recording] mode = "process"`` the recording runs in one.
        ``children=False``: the process alone (the tap's forwarding process).
        """
        return sum(self.cpu_times(children))

    def cpu_times(self, children: bool = True) -> tuple[float, float]:
        """:meth:`cpu_s` as (user, system) seconds: the kernel's share is the sockets' cost."""
        user = system = 0.0
        for pid in process_tree(self.proc.pid) if children else [self.proc.pid]:
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                if pid == self.proc.pid:
                    return float("nan"), float("nan")
                continue
            user += int(fields[11]) / CLK_TCK
            system += int(fields[12]) / CLK_TCK
        return user, system

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM (the tap drains and closes its bundle), then SIGKILL if it hangs."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def start(
    name: str,
    cmd: list[str],
    port: int,
    tmp: Path,
    env: dict[str, str] | None = None,
    **extra: Any,
) -> Service:
    """Start ``cmd`` with stdout/stderr to a log file and wait for its port."""
    log = tmp / f"{name}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, cwd=tmp if env else ROOT, env=env
        )
    service = Service(name, port, proc, log, **extra)
    try:
        wait_port(port, proc)
    except RuntimeError:
        service.stop(5)
        sys.stderr.write(log.read_text(errors="replace")[-2000:])
        raise
    return service


def start_all(args: argparse.Namespace, tmp: Path) -> dict[str, Service]:
    """The origin and every proxy target asked for."""
    services: dict[str, Service] = {}
    port = free_port()
    if args.origin == "sdk":
        cmd = [PY, "-m", "mcp_tap.demo.origin", "--listen", f"127.0.0.1:{port}"]
    else:
        cmd = [PY, str(HERE / "origin.py"), "--port", str(port)]
    services["direct"] = start("origin", cmd, port, tmp)
    upstream = f"http://127.0.0.1:{port}"
    mcp_tap = str(Path(PY).parent / "mcp-tap")
    for target in args.targets:
        if target == "direct":
            continue
        p = free_port()
        if target in ("tap-norecord", "tap-batched"):
            evidence = tmp / f"evidence-{target}"
            cmd = [PY, str(HERE / "tap_variant.py"), "--listen", f"127.0.0.1:{p}"]
            cmd += ["--upstream", upstream, "--evidence", str(evidence)]
            cmd += ["--log-level", args.tap_log_level]
            cmd.append("--no-record" if target == "tap-norecord" else "--batched-writer")
            services[target] = start(target, cmd, p, tmp, evidence=evidence)
        elif target.startswith("tap"):
            evidence = tmp / f"evidence-{target}"
            admin = free_port()
            cmd = [mcp_tap, "proxy", "--listen", f"127.0.0.1:{p}", "--upstream", upstream]
            cmd += ["--evidence", str(evidence), "--admin", f"127.0.0.1:{admin}"]
            level = "warning" if target == "tap-quiet" else args.tap_log_level
            cmd += ["--log-level", level]
            if target == "tap-uvloop":
                cmd.append("--uvloop")
            if target == "tap-asyncio":
                cmd += ["--loop", "asyncio"]
            if target == "tap-before":
                code = "import sys; from mcp_tap.cli import main; sys.exit(main())"
                cmd = [PY, "-c", code, *cmd[1:]]
                env = {**os.environ, "PYTHONPATH": str(Path(args.before_root).resolve())}
            else:
                mode = "inline" if target == "tap-inline" else "process"
                env = {**os.environ, "MCP_TAP_RECORDING_MODE": mode}
            services[target] = start(
                target, cmd, p, tmp, env=env, evidence=evidence, admin_port=admin
            )
        elif target == "nginx":
            services[target] = start_nginx(args, p, upstream, tmp)
        elif target.startswith("bare"):
            cmd = [PY, str(HERE / "bare.py"), "--port", str(p), "--upstream", upstream]
            if target == "bare-uvloop":
                cmd.append("--uvloop")
            services[target] = start(target, cmd, p, tmp)
    return services


NGINX_CONF = """
daemon off;
worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/nginx-error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/nginx-body;
    proxy_temp_path {tmp}/nginx-proxy;
    upstream origin {{ server {upstream}; keepalive 64; }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://origin;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $http_host;
            proxy_buffering off;
            proxy_request_buffering off;
        }}
    }}
}}
"""


def start_nginx(args: argparse.Namespace, port: int, upstream: str, tmp: Path) -> Service:
    """nginx as a plain reverse proxy (one worker, like the tap's one forwarding process)."""
    conf = tmp / "nginx.conf"
    conf.write_text(NGINX_CONF.format(tmp=tmp, port=port,
                                      upstream=upstream.removeprefix("http://")))
    return start("nginx", [args.nginx, "-c", str(conf), "-p", str(tmp)], port, tmp)


# -- load ------------------------------------------------------------------------------


def lua_script(call: Call, tmp: Path) -> Path:
    """A wrk script that POSTs ``call`` and prints one JSON summary line."""
    path = tmp / f"wrk-{call.name}.lua"
    lines = ['wrk.method = "POST"', f"wrk.body = [==[{call.body.decode()}]==]"]
    lines += [f'wrk.headers["{k}"] = "{v}"' for k, v in call.headers]
    lines += [
        "done = function(summary, latency, requests)",
        "  local e = summary.errors",
        '  io.write(string.format(\'BENCH {"requests":%d,"seconds":%.6f,'
        '"p50_us":%.1f,"p99_us":%.1f,"errors":%d,"non2xx":%d}\\n\', '
        "summary.requests, summary.duration / 1e6, latency:percentile(50), "
        "latency:percentile(99), e.connect + e.read + e.write + e.timeout, e.status))",
        "end",
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def run_load(
    args: argparse.Namespace, url: str, port: int, call: Call, conns: int, seconds: int, tmp: Path
) -> dict[str, float]:
    """One closed-loop load run; requests/s, p50/p99 in ms, errors."""
    if args.loadgen == "wrk":
        cmd = ["wrk", "-t1", f"-c{conns}", f"-d{seconds}s", "--timeout", "10s"]
        cmd += ["-s", str(lua_script(call, tmp)), url]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 60)
        line = next((ln for ln in out.stdout.splitlines() if ln.startswith("BENCH ")), None)
        if line is None:
            raise RuntimeError(f"wrk printed no summary: {out.stdout[-500:]} {out.stderr[-500:]}")
        r = json.loads(line[6:])
        return {
            "rps": r["requests"] / r["seconds"],
            "p50_ms": r["p50_us"] / 1000,
            "p99_ms": r["p99_us"] / 1000,
            "errors": r["errors"] + r["non2xx"],
        }
    r = client(
        "load", port, call, timeout=seconds + 60, connections=conns, seconds=seconds, sse=call.sse
    )
    return {
        "rps": r["rps"],
        "p50_ms": r["p50_ms"],
        "p99_ms": r["p99_ms"],
        "errors": r["errors"] + r["non2xx"],
    }


def client(
    mode: str,
    port: int,
    call: Call | None,
    timeout: float,
    headers: tuple[tuple[str, str], ...] = (),
    **opts: Any,
) -> Any:
    """Run ``bench/client.py`` in its own process; its JSON result."""
    cmd = [PY, str(HERE / "client.py"), mode, "--port", str(port)]
    if call is not None:
        cmd += ["--body", call.body.decode()]
        headers = call.headers
    for k, v in headers:
        cmd += ["--header", f"{k}: {v}"]
    for key, value in opts.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            cmd.append(flag)
        elif value is not False:
            cmd += [flag, str(value)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        raise RuntimeError(f"client {mode} failed: {out.stderr[-1500:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def order(targets: list[str], round_no: int) -> list[str]:
    """Alternate the order round by round (ABBA), so drift hits every target alike."""
    return targets if round_no % 2 == 0 else list(reversed(targets))


@dataclass
class Cell:
    """The rounds of one (kind, concurrency) for every target."""

    kind: str
    conns: int
    rounds: dict[str, list[dict[str, float]]] = field(default_factory=dict)


def throughput(
    args: argparse.Namespace, services: dict[str, Service], tmp: Path, calls: dict[str, Call]
) -> list[Cell]:
    """Interleaved rounds for every kind and concurrency."""
    cells = []
    for kind in args.kinds:
        call = calls[kind]
        for target in args.targets:  # warm-up: connections, caches, learned tool schemas
            s = services[target]
            run_load(args, s.url, s.port, calls["json"], 8, 1, tmp)
            run_load(args, s.url, s.port, call, 8, 1, tmp)
        for conns in args.concurrency:
            cell = Cell(kind, conns, {t: [] for t in args.targets})
            for r in range(args.rounds):
                for target in order(args.targets, r):
                    s = services[target]
                    origin = services["direct"]
                    sys0 = (s.cpu_times()[1], s.cpu_times(children=False)[1])
                    cpu0 = (s.cpu_s(), origin.cpu_s(), s.cpu_s(children=False))
                    res = run_load(args, s.url, s.port, call, conns, args.seconds, tmp)
                    cpu1 = (s.cpu_s(), origin.cpu_s(), s.cpu_s(children=False))
                    sys1 = (s.cpu_times()[1], s.cpu_times(children=False)[1])
                    n = max(1.0, res["rps"] * args.seconds)
                    # The system (kernel) share of the proxy's and forwarder's CPU per request.
                    res["proxy_sys_us"] = (sys1[0] - sys0[0]) / n * 1e6
                    res["forward_sys_us"] = (sys1[1] - sys0[1]) / n * 1e6
                    # CPU per request: robust to a noisy machine where req/s is not.
                    res["origin_cpu_us"] = (cpu1[1] - cpu0[1]) / n * 1e6
                    res["proxy_cpu_us"] = (
                        (cpu1[0] - cpu0[0]) / n * 1e6 if target != "direct" else 0.0
                    )
                    # The forwarding process alone (the recording process not counted).
                    res["forward_cpu_us"] = (
                        (cpu1[2] - cpu0[2]) / n * 1e6 if target != "direct" else 0.0
                    )
                    cell.rounds[target].append(res)
                    progress(
                        f"{kind} c={conns} round {r + 1}/{args.rounds} {target}: "
                        f"{res['rps']:.0f} req/s p50 {res['p50_ms']:.3f} ms, "
                        f"CPU/req proxy {res['proxy_cpu_us']:.0f} us "
                        f"(forwarding {res['forward_cpu_us']:.0f} us) "
                        f"origin {res['origin_cpu_us']:.0f} us"
                    )
            cells.append(cell)
    return cells


def first_event(
    args: argparse.Namespace, services: dict[str, Service], call: Call
) -> dict[str, list[dict[str, float]]]:
    """Time to the first SSE event, interleaved rounds on one connection."""
    out: dict[str, list[dict[str, float]]] = {t: [] for t in args.targets}
    for r in range(args.rounds):
        for target in order(args.targets, r):
            res = client(
                "first-event", services[target].port, call, timeout=60, seconds=args.fe_seconds
            )
            out[target].append(res)
            progress(
                f"first event round {r + 1}/{args.rounds} {target}: "
                f"p50 {res['first_p50_ms']:.3f} ms (answer {res['total_p50_ms']:.1f} ms)"
            )
    return out


# -- memory ----------------------------------------------------------------------------


def process_tree(pid: int) -> list[int]:
    """``pid`` and all its descendants (from ``/proc/PID/task/*/children``)."""
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        for children in Path(f"/proc/{current}/task").glob("*/children"):
            with contextlib.suppress(OSError):
                todo += [int(c) for c in children.read_text().split()]
    return tree


def rss_kib(pid: int) -> int:
    """VmRSS of ``pid`` and its descendants in KiB (0 once it is gone)."""
    total = 0
    for member in process_tree(pid):
        try:
            for line in Path(f"/proc/{member}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total


@dataclass
class Samples:
    """RSS samples (monotonic time, KiB) and when the transfer itself was over."""

    points: list[tuple[float, int]] = field(default_factory=list)
    done_at: float = 0.0


@contextlib.contextmanager
def sampling(pid: int, every: float = 0.2) -> Iterator[Samples]:
    """Sample the RSS of ``pid`` on a thread while the block runs, and 1 s after it."""
    samples = Samples([(time.monotonic(), rss_kib(pid))])
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(every):
            samples.points.append((time.monotonic(), rss_kib(pid)))

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield samples
    finally:
        samples.done_at = time.monotonic()
        time.sleep(1.0)  # the tap judges and records the exchange once it is over
        stop.set()
        thread.join(5)
        samples.points.append((time.monotonic(), rss_kib(pid)))


def memory(args: argparse.Namespace, tap: Service) -> list[dict[str, Any]]:
    """RSS of the tap while a large body each way and a long stream pass through it."""
    pid = tap.proc.pid
    size = args.body_mb * 1000 * 1000
    checks = []

    def summarise(name: str, what: str, samples: Samples, res: Any) -> None:
        points = samples.points
        flowing = [k for t, k in points if t <= samples.done_at] or [points[0][1]]
        start = points[0][1] / 1024
        half_t = points[0][0] + (samples.done_at - points[0][0]) / 2
        half = next((k for t, k in points if t >= half_t), flowing[-1]) / 1024
        last = flowing[-1] / 1024
        peak = max(k for _, k in points) / 1024
        after = points[-1][1] / 1024
        checks.append(
            {
                "check": name,
                "what": what,
                "start_mib": start,
                "mid_mib": half,
                "last_flowing_mib": last,
                "peak_flowing_mib": max(flowing) / 1024,
                "peak_mib": peak,
                "end_mib": after,
                "growth_mib": peak - start,
                "flat": peak - start <= FLAT_MIB,
                "result": res,
            }
        )
        progress(
            f"memory {name}: start {start:.1f} half-way {half:.1f} last {last:.1f} "
            f"peak {peak:.1f} after {after:.1f} MiB"
        )

    with sampling(pid) as samples:
        res = client("upload", tap.port, None, timeout=300, headers=UPLOAD_HEADERS, size=size)
    summarise("request body", f"{args.body_mb} MB POST", samples, res)
    with sampling(pid) as samples:
        call = long_call("download", size=size)
        res = client("download", tap.port, call, timeout=300, seconds=240)
    summarise("response body", f"{args.body_mb} MB JSON answer", samples, res)
    with sampling(pid) as samples:
        call = long_call("stream", seconds=args.stream_seconds, interval_ms=args.stream_interval)
        res = client(
            "stream", tap.port, call, timeout=args.stream_seconds + 120, seconds=args.stream_seconds
        )
        res["seconds_asked"] = args.stream_seconds
    per_s = 1000 / args.stream_interval
    summarise(
        "SSE stream",
        f"{args.stream_seconds:g} s, {per_s:g} events/s",
        samples,
        res,
    )
    return checks


# -- evidence check --------------------------------------------------------------------


def scrape(service: Service) -> dict[str, Any]:
    """Exchanges, findings by rule and evidence counters from the tap's /metrics."""
    url = f"http://127.0.0.1:{service.admin_port}/metrics"
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    out: dict[str, Any] = {"exchanges": 0.0, "findings": {}, "evidence": {}}
    for line in text.splitlines():
        if line.startswith("mcptap_exchanges_total"):
            out["exchanges"] += float(line.rsplit(" ", 1)[1])
        elif line.startswith("mcptap_findings_total"):
            rule = line.split('rule="', 1)[1].split('"', 1)[0]
            out["findings"][rule] = out["findings"].get(rule, 0) + float(line.rsplit(" ", 1)[1])
        elif line.startswith("mcptap_evidence_records_written_total"):
            out["evidence"]["written"] = float(line.rsplit(" ", 1)[1])
        elif line.startswith("mcptap_evidence_records_lost_total"):  # one series per reason
            lost = out["evidence"].get("lost", 0.0) + float(line.rsplit(" ", 1)[1])
            out["evidence"]["lost"] = lost
        elif line.startswith("mcptap_clients_held_total"):  # back-pressure pauses
            out["held"] = float(line.rsplit(" ", 1)[1])
        elif line.startswith("mcptap_clients_held_seconds_total"):
            out["held_s"] = float(line.rsplit(" ", 1)[1])
    return out


def closed_bundle(service: Service) -> dict[str, Any]:
    """The ``closed`` summary of the tap's bundle (after it stopped)."""
    if service.evidence is None:
        return {}
    for bundle in sorted(service.evidence.glob("*/bundle.json")):
        return dict(json.loads(bundle.read_text()).get("closed") or {})
    return {}


# -- report ----------------------------------------------------------------------------


def med(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def summarise_cells(cells: list[Cell]) -> list[dict[str, Any]]:
    """Per (kind, concurrency, target): medians, and paired ratios against direct."""
    rows = []
    for cell in cells:
        direct = cell.rounds.get("direct", [])
        for target, rounds in cell.rounds.items():
            pairs = list(zip(direct, rounds, strict=False))
            rows.append(
                {
                    "kind": cell.kind,
                    "conns": cell.conns,
                    "target": target,
                    "rps": med([r["rps"] for r in rounds]),
                    "p50_ms": med([r["p50_ms"] for r in rounds]),
                    "p99_ms": med([r["p99_ms"] for r in rounds]),
                    "ratio": med([r["rps"] / d["rps"] for d, r in pairs if d["rps"]]),
                    "added_p50_ms": med([r["p50_ms"] - d["p50_ms"] for d, r in pairs]),
                    "errors": sum(r["errors"] for r in rounds),
                    "proxy_cpu_us": med([r["proxy_cpu_us"] for r in rounds]),
                    "forward_cpu_us": med([r["forward_cpu_us"] for r in rounds]),
                    "proxy_sys_us": med([r.get("proxy_sys_us", 0.0) for r in rounds]),
                    "forward_sys_us": med([r.get("forward_sys_us", 0.0) for r in rounds]),
                    "origin_cpu_us": med([r["origin_cpu_us"] for r in rounds]),
                    "rounds": rounds,
                }
            )
    return rows


def markdown(report: dict[str, Any]) -> str:
    """The tables, as markdown."""
    out = []
    env = report["environment"]
    out.append(
        f"Machine: {env['cpus']} CPUs, Python {env['python']}, aiohttp {env['aiohttp']}, "
        f"load generator {env['loadgen']}, origin {env['origin']}; "
        f"{env['rounds']} interleaved rounds of {env['seconds']} s per cell, medians; "
        f"load average {env['load_before']} before, {env['load_after']} after."
    )
    out.append("")
    out.append(
        "| answer | conc. | via | req/s | x direct | p50 ms | added p50 ms | p99 ms "
        "| proxy CPU µs/req | forwarding process CPU µs/req | recording process CPU µs/req "
        "| origin CPU µs/req |"
    )
    out.append("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in report["throughput"]:
        direct = r["target"] == "direct"
        ratio = "1" if direct else f"{r['ratio']:.2f}"
        added = "" if direct else f"{r['added_p50_ms']:+.3f}"
        proxy_cpu = "" if direct else f"{r['proxy_cpu_us']:.0f}"
        forward_cpu = "" if direct else f"{r['forward_cpu_us']:.0f}"
        recording = r["target"].startswith("tap") and r["target"] != "tap-inline"
        record_cpu = f"{r['proxy_cpu_us'] - r['forward_cpu_us']:.0f}" if recording else ""
        out.append(
            f"| {r['kind']} | {r['conns']} | {r['target']} | {r['rps']:.0f} | {ratio} | "
            f"{r['p50_ms']:.3f} | {added} | {r['p99_ms']:.2f} | {proxy_cpu} | {forward_cpu} | "
            f"{record_cpu} | {r['origin_cpu_us']:.0f} |"
        )
    split = [r for r in report["throughput"]
             if r["target"] != "direct" and r["conns"] == max(args_conns(report))]
    if split:
        out.append("")
        out.append("Of that CPU per request, the system (kernel) part, at the highest "
                   "concurrency (µs, user + system):")
        out.append("")
        out.append("| answer | via | forwarding process | recording process |")
        out.append("|---|---|---:|---:|")
        for r in split:
            recording = r["target"].startswith("tap") and r["target"] != "tap-inline"
            # Only the tap splits its work over two processes; any other proxy's whole
            # process tree is its forwarding.
            fwd_cpu, fwd_sys = ((r["forward_cpu_us"], r.get("forward_sys_us", 0.0))
                                if recording else (r["proxy_cpu_us"], r.get("proxy_sys_us", 0.0)))
            rec_sys = r.get("proxy_sys_us", 0.0) - fwd_sys
            rec_user = r["proxy_cpu_us"] - fwd_cpu - rec_sys
            out.append(
                f"| {r['kind']} | {r['target']} | {fwd_cpu - fwd_sys:.0f} + {fwd_sys:.0f} | "
                + (f"{rec_user:.0f} + {rec_sys:.0f} |" if recording else " |")
            )
    errors = sum(r["errors"] for r in report["throughput"])
    out.append("")
    out.append(f"Load-generator errors (socket errors + non-2xx) over all rounds: {errors}.")
    fe = report.get("first_event")
    if fe:
        out.append("")
        out.append(
            f"First SSE event (one connection, origin waits {report['environment']['gap_ms']} "
            "ms between events):"
        )
        out.append("")
        out.append("| via | first event p50 ms | added ms | first event p99 ms | answer p50 ms |")
        out.append("|---|---:|---:|---:|---:|")
        for row in fe:
            added = "" if row["target"] == "direct" else f"{row['added_ms']:+.3f}"
            out.append(
                f"| {row['target']} | {row['first_p50_ms']:.3f} | {added} | "
                f"{row['first_p99_ms']:.3f} | {row['total_p50_ms']:.2f} |"
            )
    mem = report.get("memory")
    if mem:
        out.append("")
        out.append("Tap RSS while large or long answers pass through (recording on):")
        out.append("")
        out.append(
            "| check | what | start | half-way | end of transfer | 1 s after | peak "
            "| peak - start | flat |"
        )
        out.append("|---|---|---:|---:|---:|---:|---:|---:|---|")
        for m in mem:
            out.append(
                f"| {m['check']} | {m['what']} | {m['start_mib']:.1f} | {m['mid_mib']:.1f} | "
                f"{m['last_flowing_mib']:.1f} | {m['end_mib']:.1f} | {m['peak_mib']:.1f} | "
                f"{m['growth_mib']:.1f} | {'yes' if m['flat'] else 'NO'} |"
            )
        out.append("")
        out.append(
            f"RSS in MiB. Flat: peak - start <= {FLAT_MIB:g} MiB, i.e. bounded by the capture "
            "caps (1 MiB of body, 10000 SSE events kept per exchange), not by body size or "
            "stream length."
        )
    ev = report.get("evidence")
    if ev:
        out.append("")
        for target, e in ev.items():
            findings = ", ".join(f"{k} {v:.0f}" for k, v in sorted(e["findings"].items()))
            closed = e.get("closed", {})
            held = (f"; clients held back {e['held']:.0f} times, {e['held_s']:.1f} s in all"
                    if "held" in e else "")
            out.append(
                f"- {target}: {e['exchanges']:.0f} exchanges judged, "
                f"{closed.get('records', e['evidence'].get('written', 0)):.0f} records written, "
                f"{closed.get('lost', e['evidence'].get('lost', 0)):.0f} lost{held}; "
                f"findings: {findings or 'none'}"
            )
    out.append("")
    out.append("Targets (mcp-tap, recording and checks on):")
    out.append("")
    for line in report["verdicts"]:
        out.append(f"- {line}")
    return "\n".join(out) + "\n"


def args_conns(report: dict[str, Any]) -> list[int]:
    """The concurrencies the throughput rows were measured at."""
    return sorted({r["conns"] for r in report["throughput"]}) or [0]


def verdicts(report: dict[str, Any]) -> list[str]:
    """The issue's targets, met or not, for each mcp-tap variant measured."""
    lines = []
    rows = report["throughput"]

    def cell(target: str, conns: int, kind: str) -> dict[str, Any] | None:
        return next(
            (r for r in rows if (r["target"], r["conns"], r["kind"]) == (target, conns, kind)),
            None,
        )

    def verdict(what: str, value: float, target: float, unit: str, at_least: bool) -> str:
        ok = value >= target if at_least else value <= target
        sign = "≥" if at_least else "≤"
        return f"{what} {value:.2f}{unit} (target {sign} {target:g}{unit}): " + (
            "met" if ok else "NOT met"
        )

    for target in ("tap", "tap-inline", "tap-uvloop"):
        c1 = cell(target, 1, "json")
        c32 = cell(target, 32, "json")
        sse32 = cell(target, 32, "sse")
        for kind, row in (("JSON", c32), ("SSE", sse32)):
            if row:
                lines.append(verdict(f"{target}: {kind} c=32 throughput", row["ratio"],
                                     TARGET_RATIO_C32, "x direct", True))
        if c32:
            forward = c32["forward_cpu_us"]
            lines.append(verdict(f"{target}: forwarding process CPU per JSON request", forward,
                                 TARGET_FORWARD_CPU_US, " µs", False))
            if target == "tap":
                lines.append(verdict(f"{target}: recording process CPU per exchange",
                                     c32["proxy_cpu_us"] - forward, TARGET_RECORD_CPU_US,
                                     " µs", False))
        if c1:
            lines.append(verdict(f"{target}: JSON c=1 added p50", c1["added_p50_ms"],
                                 TARGET_ADDED_P50_MS, " ms", False))
        fe = next((f for f in report.get("first_event", []) if f["target"] == target), None)
        if fe:
            lines.append(verdict(f"{target}: first SSE event added", fe["added_ms"],
                                 TARGET_ADDED_FIRST_EVENT_MS, " ms", False))
    for m in report.get("memory", []):
        lines.append(
            f"tap: memory during {m['check']} ({m['what']}): +{m['growth_mib']:.1f} MiB peak "
            f"(flat = ≤ {FLAT_MIB:g} MiB): {'met' if m['flat'] else 'NOT met'}"
        )
    return lines


def progress(message: str) -> None:
    sys.stderr.write(f"[bench {time.strftime('%H:%M:%S')}] {message}\n")
    sys.stderr.flush()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="short run (about 1 minute)")
    p.add_argument("--long", action="store_true", help="10-minute stream for the memory check")
    p.add_argument("--targets", default=None, help=f"comma list of {','.join(ALL_TARGETS)}")
    p.add_argument("--kinds", default="json,sse")
    p.add_argument("--concurrency", default="1,32")
    p.add_argument("--rounds", type=int, default=None, help="interleaved rounds per cell")
    p.add_argument("--seconds", type=int, default=None, help="seconds per round (integer)")
    p.add_argument("--fe-seconds", type=float, default=None, help="seconds per first-event round")
    p.add_argument("--gap-ms", type=float, default=5.0, help="origin pause between SSE events")
    p.add_argument("--body-mb", type=int, default=200)
    p.add_argument("--stream-seconds", type=float, default=None)
    p.add_argument("--stream-interval", type=float, default=5.0, help="ms between stream events")
    p.add_argument("--no-memory", action="store_true")
    p.add_argument("--no-first-event", action="store_true")
    p.add_argument("--origin", choices=["aiohttp", "sdk"], default="aiohttp")
    p.add_argument("--loadgen", choices=["wrk", "python"], default=None)
    p.add_argument("--tap-log-level", default="info", help="the tap's --log-level")
    p.add_argument("--json", dest="json_out", help="write the full report (JSON) here")
    p.add_argument("--markdown", help="write the tables (markdown) here")
    p.add_argument("--keep", action="store_true", help="keep the temporary directory")
    p.add_argument("--before-root", help="directory holding the mcp_tap of target tap-before")
    p.add_argument("--nginx", default=shutil.which("nginx") or "/usr/sbin/nginx",
                   help="the nginx binary of target nginx")
    args = p.parse_args(argv)
    quick = args.quick
    default_targets = "direct,tap" if quick else ",".join(DEFAULT_TARGETS)
    args.targets = (args.targets or default_targets).split(",")
    if "direct" not in args.targets:
        args.targets.insert(0, "direct")
    if not {"tap", "tap-uvloop"} & set(args.targets):
        args.no_memory = True
    unknown = set(args.targets) - set(ALL_TARGETS)
    if unknown:
        p.error(f"unknown target(s): {', '.join(sorted(unknown))}")
    if "tap-before" in args.targets and not args.before_root:
        p.error("target tap-before needs --before-root")
    args.kinds = args.kinds.split(",")
    args.concurrency = [int(c) for c in args.concurrency.split(",")]
    args.rounds = args.rounds or (2 if quick else 5)
    args.seconds = args.seconds or (2 if quick else 3)
    args.fe_seconds = args.fe_seconds or (1.0 if quick else 2.0)
    if args.stream_seconds is None:
        args.stream_seconds = 600.0 if args.long else (10.0 if quick else 60.0)
    if args.loadgen is None:
        args.loadgen = "wrk" if shutil.which("wrk") else "python"
    if args.origin == "sdk":
        args.no_memory = True  # the SDK origin has no upload/download/stream tools
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import aiohttp

    began = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="mcp-tap-bench-"))
    load_before = os.getloadavg()[0]
    if args.origin == "sdk":
        calls = {
            "json": JSON_CALL,
            "sse": Call(
                "sse",
                tools_call("slow_count", {"n": 1}),
                workload_headers("tools/call", "slow_count"),
                sse=True,
            ),
        }
        fe_call = Call(
            "sse",
            tools_call("slow_count", {"n": 2}),
            workload_headers("tools/call", "slow_count"),
            sse=True,
        )
    else:
        calls = {"json": JSON_CALL, "sse": SSE_CALL}
        fe_call = sse_call(gap_ms=args.gap_ms)
    report: dict[str, Any] = {}
    services: dict[str, Service] = {}
    try:
        services = start_all(args, tmp)
        progress(f"started {', '.join(f'{n}:{s.port}' for n, s in services.items())} in {tmp}")
        cells = throughput(args, services, tmp, calls)
        report["throughput"] = [{k: v for k, v in row.items()} for row in summarise_cells(cells)]
        if not args.no_first_event and "sse" in args.kinds:
            fe = first_event(args, services, fe_call)
            direct = fe.get("direct", [])
            report["first_event"] = [
                {
                    "target": t,
                    "first_p50_ms": med([r["first_p50_ms"] for r in rs]),
                    "first_p99_ms": med([r["first_p99_ms"] for r in rs]),
                    "total_p50_ms": med([r["total_p50_ms"] for r in rs]),
                    "added_ms": med(
                        [
                            r["first_p50_ms"] - d["first_p50_ms"]
                            for d, r in zip(direct, rs, strict=False)
                        ]
                    ),
                    "rounds": rs,
                }
                for t, rs in fe.items()
            ]
        if not args.no_memory:
            tap = services.get("tap") or services["tap-uvloop"]
            report["memory"] = memory(args, tap)
        report["evidence"] = {
            name: scrape(s) for name, s in services.items() if s.admin_port is not None
        }
    finally:
        for name, s in reversed(list(services.items())):
            s.stop()
            if name in report.get("evidence", {}):
                report["evidence"][name]["closed"] = closed_bundle(s)
    report["environment"] = {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "aiohttp": aiohttp.__version__,
        "loadgen": "wrk -t1" if args.loadgen == "wrk" else "bench/client.py",
        "origin": "bench/origin.py (aiohttp)" if args.origin == "aiohttp" else "MCP SDK",
        "rounds": args.rounds,
        "seconds": args.seconds,
        "gap_ms": 20.0 if args.origin == "sdk" else args.gap_ms,
        "load_before": round(load_before, 2),
        "load_after": round(os.getloadavg()[0], 2),
        "wall_s": round(time.monotonic() - began, 1),
    }
    report["verdicts"] = verdicts(report)
    text = markdown(report)
    sys.stdout.write(text)
    if args.markdown:
        Path(args.markdown).write_text(text)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(report, indent=2, default=str))
    if args.keep:
        progress(f"kept {tmp}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    progress(f"done in {report['environment']['wall_s']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
