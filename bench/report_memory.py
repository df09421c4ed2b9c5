"""Memory and CPU of ``mcp-tap report`` on big bundles: flat memory, bounded samples.

Writes two unsigned bundles of proxy-written exchanges (the templates come from a real
``mcp-tap demo --drive`` capture, via ``bench/offline.py``'s generator), then in a fresh
process each runs the report's I/O and rendering (:func:`mcp_tap.report.load_report` and
:func:`~mcp_tap.report.render_report`: verify, stream, tally, page) and prints CPU seconds,
exchanges per CPU-second, peak RSS and the page's size.

Run: ``.venv/bin/python bench/report_memory.py`` (``--small 20000 --large 200000`` by
default; a few minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from offline import _peak_rss_kb, generate, proxy_templates  # bench/ is on sys.path above

REPO = Path(__file__).resolve().parent.parent


def _child(bundle: Path) -> dict[str, Any]:
    from mcp_tap.report import load_report, render_report

    cpu0 = time.process_time()
    data = load_report([bundle])
    page = render_report(data)
    cpu = time.process_time() - cpu0
    return {"exchanges": data.exchanges, "cpuSeconds": round(cpu, 2),
            "exchangesPerCpuSecond": round(data.exchanges / cpu) if cpu else None,
            "peakRssMB": round(_peak_rss_kb() / 1024, 1), "pageKB": len(page) // 1024,
            "latencySamples": len(data.latency.values), "kept": len(data.details)}


def main() -> int:
    """Generate the bundles and measure the report on each in its own process."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", type=int, default=20_000)
    parser.add_argument("--large", type=int, default=200_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mcp-tap-report-bench-") as tmp:
        work = Path(tmp)
        templates = proxy_templates(work)
        for count in (args.small, args.large):
            bundle = work / f"bundle-{count}"
            generate(bundle, count, templates, signed=False)
            done = subprocess.run([sys.executable, __file__, "_child", str(bundle)], cwd=REPO,
                                  check=True, capture_output=True, text=True, timeout=3600)
            print(json.dumps({"bundle": count, **json.loads(done.stdout)}))
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["_child"]:
        print(json.dumps(_child(Path(sys.argv[2]))))
        sys.exit(0)
    sys.exit(main())
