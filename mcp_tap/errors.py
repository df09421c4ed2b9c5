"""The exceptions mcp-tap raises on purpose.

```
TapError                    base of everything mcp-tap raises on purpose
 ├── InputError             bad input from the user: file, fixture, policy, config (exit 2)
 │    └── BundleFormatError unknown bundle version or malformed evidence record
 │         └── EvidenceLimitError a segment line or file past its bound (read no further)
 ├── UpstreamError          the upstream could not be reached (probe, replay, proxy)
 ├── StoreError             the object store could not be reached or refused a request
 └── PhaseError             an exchange event its phase has no transition for (a bug)
```

Foreign exceptions (OSError, orjson.JSONDecodeError, httpx.HTTPError, ...) are translated
into these at one boundary per shell, so the CLI can print one line and choose the exit code.
"""

from __future__ import annotations


class TapError(Exception):
    """Base of every error mcp-tap raises on purpose."""


class InputError(TapError):
    """Bad input from the user: an unreadable or malformed file, fixture, policy or config."""


class BundleFormatError(InputError):
    """An evidence bundle of an unknown format version, or a malformed record."""


class EvidenceLimitError(BundleFormatError):
    """A segment line longer than the record limit, or a segment larger than its manifest
    says: the read stopped there (what follows is not read at all)."""


class UpstreamError(TapError):
    """The upstream server could not be reached or answered unusably."""


class StoreError(TapError):
    """The S3-compatible object store could not be reached, or refused a request."""


class PhaseError(TapError):
    """An event the exchange's phase has no transition for (``proxy/splice/state.py``'s
    table): a bug in the forwarding core, never the traffic's doing."""
