"""The checks of the ``[evidence]`` shipping options (``ship``, ``release``, ``retention``,
``lock_mode``) and the refusal of store credentials in the config file."""

from __future__ import annotations

import re
from typing import Any, Final

from mcp_tap.errors import InputError
from mcp_tap.evidence.shipping import LOCK_MODES, ShipOptions, parse_retention
from mcp_tap.evidence.store import StoreLocation, is_store_url, pod_name
from mcp_tap.proxy.options.values import EvidenceOptions

# A key that looks like it holds a store credential: named, with one line, never echoed (its
# value is never shown either); the store's credentials come from the AWS_* environment.
_CREDENTIAL_KEY: Final = re.compile(
    r"(secret|access_key|accesskey|key_id|password|token|credential|session)", re.IGNORECASE)


def check_no_credentials(section: Any, source: str | None) -> None:
    """Refuse a credential-like key in ``[evidence]`` (before the unknown-key check, so the
    line says where credentials belong)."""
    if not isinstance(section, dict):
        return
    for key in sorted(section):
        if isinstance(key, str) and _CREDENTIAL_KEY.search(key):
            raise InputError(
                f"{source}: [evidence] {key}: store credentials are never read from the config "
                "file; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_ENDPOINT_URL, "
                "AWS_REGION) in the environment")


def check_shipping(evidence: EvidenceOptions, recording_mode: str) -> None:
    """Check the shipping options (one line each); nothing when ``ship`` is empty."""
    if not evidence.ship:
        return
    if recording_mode != "process":
        # The shipper runs beside the writer in the recording process only.
        raise InputError("[evidence] ship needs [recording] mode = \"process\" (the default)")
    if not is_store_url(evidence.ship) or "@" in evidence.ship:
        # Not echoed: a URL with user information may hold a credential.
        raise InputError("[evidence] ship must be s3://BUCKET/PREFIX (credentials come from "
                         "the AWS_* environment, never from the URL)")
    location = StoreLocation.parse(evidence.ship)
    if not evidence.release:
        raise InputError("[evidence] ship needs a release label: set [evidence] release (or "
                         "MCP_TAP_EVIDENCE_RELEASE): keys are PREFIX/<release>/<pod>/<bundle>")
    location.child(evidence.release)  # one key segment, or one clear line
    parse_retention(evidence.retention)
    if evidence.lock_mode not in LOCK_MODES:
        raise InputError(f"[evidence] lock_mode must be one of {', '.join(LOCK_MODES)}, "
                         f"got {evidence.lock_mode!r}")


def ship_options(evidence: EvidenceOptions) -> ShipOptions | None:
    """The shipper's options (None when nothing is shipped); the pod is ``MCP_TAP_POD``,
    else the hostname."""
    if not evidence.ship:
        return None
    return ShipOptions(StoreLocation.parse(evidence.ship), evidence.release, pod_name(),
                       evidence.spool_max_bytes, parse_retention(evidence.retention),
                       evidence.lock_mode)
