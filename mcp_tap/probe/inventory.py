"""What the live server offers (tools, prompts, resources, extensions), learned before
the cases so golden requests can be adapted to it; the per-era session state.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from mcp_tap.core.eras import (
    HEADER_METHOD,
    HEADER_PROTOCOL_VERSION,
    META_CLIENT_CAPABILITIES,
    META_PROTOCOL_VERSION,
    MODERN_VERSIONS,
    Era,
)
from mcp_tap.core.headers import HeaderMap
from mcp_tap.errors import UpstreamError
from mcp_tap.probe.answers import (
    answer_messages,
    answer_summary,
    final_response,
)
from mcp_tap.probe.client import (
    HttpClient,
)

MODERN_VERSION: Final = MODERN_VERSIONS[0]


_INVENTORY_PAGES: Final = 10


@dataclass(frozen=True, slots=True)
class Inventory:
    """What the live server offers, learned before the cases (for adapting them)."""

    tools: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    prompts: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    resources: tuple[str, ...] = ()
    extensions: frozenset[str] = frozenset()
    problems: tuple[str, ...] = ()

    @property
    def tool_schemas(self) -> dict[str, Any]:
        """Tool name -> ``inputSchema``, for the judge's ``Mcp-Param-*`` rung."""
        return {name: tool.get("inputSchema") for name, tool in self.tools.items()}

    @property
    def output_schemas(self) -> dict[str, Any]:
        """Tool name -> ``outputSchema`` (tools that declare one), for the judge's
        ``structuredContent`` rule."""
        return {name: tool["outputSchema"] for name, tool in self.tools.items()
                if "outputSchema" in tool}


@dataclass(slots=True)
class Session:
    """Per-era state shared by every case of the era."""

    era: Era
    inventory: Inventory = field(default_factory=Inventory)
    session_id: str | None = None
    negotiated: str | None = None


def _modern_request(method: str, request_id: str, params: Mapping[str, Any] | None = None
                    ) -> tuple[HeaderMap, bytes]:
    body_params = dict(params or {})
    body_params["_meta"] = {META_PROTOCOL_VERSION: MODERN_VERSION, META_CLIENT_CAPABILITIES: {}}
    headers = HeaderMap(((HEADER_PROTOCOL_VERSION, MODERN_VERSION), (HEADER_METHOD, method)))
    body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": body_params}
    return headers, orjson.dumps(body)


def _legacy_request(method: str, request_id: str, negotiated: str,
                    params: Mapping[str, Any] | None = None) -> tuple[HeaderMap, bytes]:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params:
        body["params"] = dict(params)
    return HeaderMap(((HEADER_PROTOCOL_VERSION, negotiated),)), orjson.dumps(body)


def _pages(http: HttpClient, state: Session, method: str, key: str
           ) -> tuple[list[Any], str | None]:
    """Every item of a paginated list method, or the reason it could not be listed."""
    items: list[Any] = []
    cursor: str | None = None
    for page in range(_INVENTORY_PAGES):
        params = {"cursor": cursor} if cursor else None
        request_id = f"probe-inventory-{method}-{page}"
        if state.era is Era.MODERN:
            headers, body = _modern_request(method, request_id, params)
        else:
            headers, body = _legacy_request(method, request_id, state.negotiated or "", params)
        try:
            answer = http.post(headers, body, session=state.session_id)
        except UpstreamError as exc:
            if not http.reached:
                raise
            return items, f"{method}: no answer ({exc})"
        final = final_response(answer_messages(answer))
        result = final.get("result") if final else None
        if not isinstance(result, dict) or not isinstance(result.get(key), list):
            return items, f"{method}: {answer_summary(answer.status, final)}"
        items += result[key]
        cursor = result.get("nextCursor") if isinstance(result.get("nextCursor"), str) else None
        if not cursor:
            break
    return items, None


def _named(items: Iterable[Any], key: str) -> dict[str, Mapping[str, Any]]:
    return {item[key]: item for item in items
            if isinstance(item, dict) and isinstance(item.get(key), str)}


def learn_inventory(http: HttpClient, state: Session, extensions: frozenset[str]) -> Inventory:
    """Learn the server's tools, prompts and resources (best effort; the reasons are kept)."""
    found: dict[str, list[Any]] = {}
    problems: list[str] = []
    for method, key in (("tools/list", "tools"), ("prompts/list", "prompts"),
                        ("resources/list", "resources")):
        found[key], problem = _pages(http, state, method, key)
        problems += [problem] if problem else []
    return Inventory(
        tools=_named(found["tools"], "name"),
        prompts=_named(found["prompts"], "name"),
        resources=tuple(_named(found["resources"], "uri")),
        extensions=extensions,
        problems=tuple(problems),
    )


def extensions_of(capabilities: Any) -> frozenset[str]:
    """The extension names a ``capabilities`` object advertises."""
    ext = capabilities.get("extensions") if isinstance(capabilities, dict) else None
    return frozenset(ext) if isinstance(ext, dict) else frozenset()


def modern_extensions(http: HttpClient) -> frozenset[str]:
    """The extensions ``server/discover`` advertises (none when it does not answer)."""
    headers, body = _modern_request("server/discover", "probe-inventory-discover")
    final = final_response(answer_messages(http.post(headers, body)))
    result = final.get("result") if final else None
    return extensions_of(result.get("capabilities") if isinstance(result, dict) else None)
