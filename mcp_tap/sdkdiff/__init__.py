"""The SDK differential: raw wire results against the real Python SDK's typed view.

An application that uses the official SDK client (``mcp`` / ``mcp-types`` 2.3.0) never sees
the wire: it sees the public ``mcp_types`` model (``ListToolsResult``, ``CallToolResult``,
...) that ``ClientSession.send_request`` builds from the raw result. This module reproduces
that path with the SDK's own functions and models, dumps the typed view back to the wire
shape the way the SDK serialises (``model_dump(mode="json", by_alias=True,
exclude_none=True)``) and reports, per result, what the SDK dropped, changed or synthesized.

The path, as ``mcp/client/session.py`` 2.3.0 runs it for a received result:

1. ``_clamp_inbound_ttl``: a negative numeric ``ttlMs`` is floored to ``0``.
2. ``mcp_types.sdk_methods.validate_server_result(method, version, raw)``: the revision's
   generated wire model (``mcp_types._v2026_07_28`` / ``_v2025_11_25``) must accept the raw
   result; a ``(method, version)`` the surface map does not know is skipped, like the SDK does.
3. Top-level keys that only a *later* revision declares for the method (``ttlMs``,
   ``cacheScope``, ``resultType`` on a 2025-era session) are removed before parsing.
4. The version-free public model (``mcp_types.methods.MONOLITH_RESULTS[method]``, the very
   types ``ClientSession`` passes to ``send_request``) validates the rest with
   ``by_name=False``; unknown fields are ignored, defaults fill what the wire omitted.
5. ``tools/list`` on a modern session: ``ClientSession._absorb_tool_listing`` removes every
   tool whose ``x-mcp-header`` annotations are invalid, using the SDK's own
   ``mcp.shared.inbound.find_invalid_x_mcp_header`` (applied when the ``mcp`` package is
   installed; :func:`sdk_provenance` says whether it was).

Two methods take a different path in the SDK and are reproduced as such: ``initialize`` is
always validated at the session's pre-handshake fallback revision ``2025-11-25`` and refused
when its ``protocolVersion`` is not a handshake revision; ``server/discover`` is only clamped
and parsed with ``DiscoverResult.model_validate`` (no wire-model validation at all).

Differences are found by a recursive walk of the wire result against the typed view, with
paths such as ``result.tools[0].futureHint`` (keys that are not plain identifiers are
bracketed: ``result._meta["io.modelcontextprotocol/serverInfo"]``):

* ``sdk.dropped``: present on the wire, absent from the view (reported at the highest
  missing node; a wire ``null`` for a field the model knows is not a drop, the model holds
  ``None``);
* ``sdk.changed``: present in both with a different JSON value or JSON type (``1`` vs ``1.0``);
* ``sdk.synthesized``: present in the view (not ``None``) where the wire was silent.

**Allowlist.** A difference is *allowed* when its path's last key, or its full path, or its
full path with list indices written ``[]`` (``result.tools[].futureHint``) is in the
allowlist. The allowlist covers all three rules: a bookkeeping field the application is not
meant to act on may be dropped, defaulted or rewritten without it being a semantic
difference. Allowed differences stay in the report (``allowed``), they just do not count
against the gate. The default names ``resultType``, ``_meta``, ``ttlMs`` and ``cacheScope``.

Apart from reading the installed SDK's package versions (:func:`sdk_provenance`) and the
bundles :func:`diff_bundles` is given (streamed, one process per bundle), the package does
no I/O and reads no clock; the ``sdk-diff`` command and the gate feed it records.

Modules: :mod:`~mcp_tap.sdkdiff.sdk` (the SDK's own path: versions, parsing, the typed
view), :mod:`~mcp_tap.sdkdiff.compare` (the recursive diff, the allowlist, the memo of
outcomes), :mod:`~mcp_tap.sdkdiff.records` (evidence records in, the report out).
"""


from mcp_tap.sdkdiff.compare import diff_result, differences, is_allowed
from mcp_tap.sdkdiff.records import (
    EXAMPLES,
    SdkDiffEntry,
    SdkDiffReport,
    SdkDiffTally,
    diff_bundles,
    diff_records,
)
from mcp_tap.sdkdiff.sdk import (
    ERAS,
    TYPED_METHODS,
    Difference,
    SdkParseError,
    sdk_provenance,
    sdk_version,
    sdk_view,
)
from mcp_tap.sdkversion import DEFAULT_ALLOWLIST

__all__ = [
    "DEFAULT_ALLOWLIST",
    "ERAS",
    "EXAMPLES",
    "TYPED_METHODS",
    "Difference",
    "SdkDiffEntry",
    "SdkDiffReport",
    "SdkDiffTally",
    "SdkParseError",
    "diff_bundles",
    "diff_records",
    "diff_result",
    "differences",
    "is_allowed",
    "sdk_provenance",
    "sdk_version",
    "sdk_view",
]
