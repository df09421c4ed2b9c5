"""Where evidence lives in an S3-compatible object store, and the one client that reaches it.

A store location is written ``s3://BUCKET/PREFIX``. A shipped bundle keeps the file names it
has on disk (``bundle.json``, ``segment-000001.jsonl``, ``segment-000001.manifest.json``,
...) under the key prefix::

    PREFIX/<release>/<pod>/<bundle>/<file name>

so one prefix per release lists every pod's evidence, and a bundle in the store reads like a
bundle directory (:func:`bundle_location`). ``<bundle>`` is the bundle directory's name.

The client is boto3 (botocore): it speaks S3 Object Lock (``ObjectLockMode`` and
``ObjectLockRetainUntilDate`` on put, which obstore's put options do not carry), reads
credentials, endpoint and region from the standard AWS environment (``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_ENDPOINT_URL``, ``AWS_REGION``) and streams a get as it is
read. Nothing about the store's credentials is ever read from mcp-tap's config file.
Its exceptions are translated into :class:`~mcp_tap.errors.StoreError` in one place,
:func:`translated`.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final

from mcp_tap.errors import InputError, StoreError

SCHEME: Final = "s3://"
# S3's bucket naming rules (3-63 characters of lower-case letters, digits, dots and hyphens,
# starting and ending with a letter or digit); a store refuses anything else anyway, but a
# typo should be one clear line before any request is made.
_BUCKET_RE: Final = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
# One path segment of a key that mcp-tap builds (release label, pod, bundle name).
_SEGMENT_RE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
DEFAULT_TIMEOUT_S: Final = 30.0


def is_store_url(text: str | os.PathLike[str]) -> bool:
    """Whether ``text`` names an object-store location (``s3://...``) rather than a path."""
    return isinstance(text, str) and text.startswith(SCHEME)


@dataclass(frozen=True, slots=True)
class StoreLocation:
    """A bucket and a key prefix (no leading or trailing ``/``; ``""`` is the whole bucket)."""

    bucket: str
    prefix: str = ""

    @classmethod
    def parse(cls, url: str) -> StoreLocation:
        """Read ``s3://BUCKET[/PREFIX]``; raise :class:`InputError` with one line otherwise."""
        if not is_store_url(url):
            raise InputError(f"not an object-store location (s3://BUCKET/PREFIX): {url!r}")
        bucket, _, prefix = url[len(SCHEME) :].partition("/")
        if not _BUCKET_RE.match(bucket):
            raise InputError(f"invalid bucket name in {url!r}")
        prefix = prefix.strip("/")
        if prefix and any(part in ("", ".", "..") for part in prefix.split("/")):
            raise InputError(f"invalid key prefix in {url!r} (empty, '.' or '..' segment)")
        return cls(bucket, prefix)

    def key(self, name: str) -> str:
        """The object key of ``name`` under this prefix."""
        return f"{self.prefix}/{name}" if self.prefix else name

    def child(self, *parts: str) -> StoreLocation:
        """The location of ``parts`` (each one key segment) under this prefix."""
        for part in parts:
            if not _SEGMENT_RE.match(part):
                raise InputError(f"invalid key segment {part!r} (letters, digits, . _ -)")
        return StoreLocation(self.bucket, "/".join(p for p in (self.prefix, *parts) if p))

    def __str__(self) -> str:
        return f"{SCHEME}{self.bucket}/{self.prefix}" if self.prefix else f"{SCHEME}{self.bucket}"


def bundle_location(root: StoreLocation, release: str, pod: str, bundle: str) -> StoreLocation:
    """Where the bundle directory named ``bundle`` of ``pod`` in ``release`` is shipped."""
    return root.child(release, pod, bundle)


def pod_name(environ: Mapping[str, str] | None = None) -> str:
    """The pod a tap runs in: ``MCP_TAP_POD`` (set from the Downward API), else the hostname."""
    env = os.environ if environ is None else environ
    name = env.get("MCP_TAP_POD") or socket.gethostname()
    # A hostname may hold characters a key segment should not; keep the readable part.
    cleaned = re.sub(r"[^A-Za-z0-9._-]", "-", name).strip(".-_") or "pod"
    return cleaned[:128]


@contextmanager
def translated(action: str, location: object) -> Iterator[None]:
    """Turn the store client's exceptions into :class:`StoreError`: one line naming the
    ``action`` and the location, the store's error code and nothing that could hold a
    credential (botocore's messages name neither the secret nor the signature)."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        yield
    except ClientError as exc:
        error = exc.response.get("Error", {})
        code = error.get("Code", "error")
        raise StoreError(f"{action} {location}: the store answered {code}") from None
    except BotoCoreError as exc:
        raise StoreError(f"{action} {location}: the store did not answer "
                         f"({type(exc).__name__})") from None


def client_from_env(*, timeout: float = DEFAULT_TIMEOUT_S, attempts: int = 3,
                    s3: Mapping[str, Any] | None = None, **options: Any) -> Any:
    """An S3 client configured from the standard AWS environment only.

    Path-style addressing when ``AWS_ENDPOINT_URL`` names an endpoint (S3-compatible stores
    on an address, where a bucket sub-domain does not resolve); botocore's standard retry
    mode with ``attempts`` attempts. ``s3`` adds to botocore's ``s3`` settings; ``options``
    are further botocore ``Config`` settings.
    """
    import boto3
    from botocore.config import Config

    addressing = "path" if os.environ.get("AWS_ENDPOINT_URL") else "auto"
    config = Config(
        connect_timeout=timeout,
        read_timeout=timeout,
        retries={"max_attempts": attempts, "mode": "standard"},
        s3={"addressing_style": addressing, **(s3 or {})},
        **options,
    )
    with translated("connect to", "the object store"):
        return boto3.session.Session().client("s3", config=config)


# -- for shipping (mcp_tap.evidence.shipping) -------------------------------------------------


def upload_client_from_env(*, timeout: float = DEFAULT_TIMEOUT_S) -> Any:
    """:func:`client_from_env`'s client for the shipper, which retries on its own schedule
    and hashes no byte it puts: every put of the shipper carries the body's SHA-256 itself
    (``ChecksumSHA256``; a sealed segment's is its manifest's, computed as it was written).

    Why: botocore hashed each body with SHA-256 for SigV4 over plain ``http`` (0.6 ns per
    byte, 40% of what shipping cost the recording process per byte) and, by default, again
    with CRC32 (0.25 ns). With ``payload_signing_enabled`` off the signature covers
    ``UNSIGNED-PAYLOAD`` and the ``x-amz-checksum-sha256`` header instead (a signed header:
    the body still cannot be changed on the way unnoticed, the store checks it against that
    digest and refuses a mismatch); with ``request_checksum_calculation`` at
    ``when_required`` botocore computes no checksum of its own beside the one given.
    Integrity from end to end does not rest on this: manifests are
    Ed25519-signed and the readers check each segment's digest."""
    return client_from_env(timeout=timeout, attempts=2,
                           s3={"payload_signing_enabled": False},
                           request_checksum_calculation="when_required")
