"""The gate service over a real S3-compatible store (SeaweedFS on loopback): the same
decisions as over directories, for bundles the pods shipped under
``s3://BUCKET/PREFIX/<release>/<pod>/<bundle>/``; ``/readyz`` says whether the store answers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
from seaweed import SeaweedStore, seaweed_store, upload_bundle
from test_proxy_fleet import fleet, serving  # noqa: F401 - the directory fleet, as fixture

from mcp_tap.proxy.fleet import FleetOptions

BUCKET = "evidence"


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SeaweedStore]:
    with seaweed_store(tmp_path) as running:
        running.make_bucket(BUCKET)
        for name, value in running.env.items():
            monkeypatch.setenv(name, value)
        yield running


@pytest.fixture
def shipped(fleet: FleetOptions, store: SeaweedStore) -> FleetOptions:  # noqa: F811
    """The directory fleet's bundles, put in the store as the pods ship them."""
    root = Path(fleet.root)
    for bundle in sorted(root.glob("*/pod-*")):
        release, pod = bundle.parent.name, bundle.name
        upload_bundle(store, BUCKET, f"fleet/{release}/{pod}/run-1", bundle)
    return FleetOptions(root=f"s3://{BUCKET}/fleet", policy=fleet.policy,
                        rollback=fleet.rollback, release="v2")


async def test_one_decision_for_the_fleet_from_the_store(shipped: FleetOptions) -> None:
    timeout = aiohttp.ClientTimeout(total=180)
    async with serving(shipped) as base, aiohttp.ClientSession(timeout=timeout) as client:
        async with client.get(f"{base}/readyz") as answer:
            assert answer.status == 200 and (await answer.json())["ready"] is True
        async with client.get(f"{base}/gate") as answer:
            assert answer.status == 200
            healthy = await answer.json()
        async with client.get(f"{base}/gate", params={"release": "v3"}) as answer:
            broken = await answer.json()
        async with client.post(f"{base}/gate/flagger?release=v3", json={"name": "x"}) as answer:
            assert answer.status == 412
    assert healthy["action"] == "promote", healthy["reasons"]
    assert healthy["reading"]["mode"] == "tallies"
    bundles = healthy["sources"]["integrity"]["bundles"]
    assert sorted(b["end"] for b in bundles) == ["closed", "closed", "open"]
    assert healthy["sources"]["conformance"]["exchanges"] == 360
    assert broken["action"] == "rollback"
    reasons = [r for r in broken["reasons"] if r["rule"] == "gate.conformance"]
    assert [(r["findings"], r["details"]["count"]) for r in reasons] == [(["response.id"], 12)]
    # The pod is named as its signed bundle.json names it; the bundle by its key prefix.
    assert reasons[0]["message"].endswith(" in pod pod-1 of release v3 (12 in bundle 1 run-1)")
    assert [(p["pod"], p["release"], p["bundle"]) for p in reasons[0]["details"]["pods"]] == [
        ("pod-1", "v3", 1)]


async def test_readyz_says_the_store_does_not_answer(
    shipped: FleetOptions, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    async with (serving(shipped) as base, aiohttp.ClientSession() as client,
                client.get(f"{base}/readyz") as answer):
        assert answer.status == 503
        body = await answer.json()
    (problem,) = body["problems"]
    assert problem == (f"reach s3://{BUCKET}/fleet: the store did not answer "
                       "(EndpointConnectionError)")
