"""mcp_tap.evidence.store: locations, key layout, the client from the environment, errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from seaweed import SECRET_KEY, seaweed_store

from mcp_tap.errors import InputError, StoreError
from mcp_tap.evidence.store import (
    StoreLocation,
    bundle_location,
    client_from_env,
    is_store_url,
    pod_name,
    translated,
)


class TestStoreLocation:
    def test_parse_bucket_and_prefix(self) -> None:
        location = StoreLocation.parse("s3://evidence/releases/")
        assert (location.bucket, location.prefix) == ("evidence", "releases")
        assert str(location) == "s3://evidence/releases"
        assert location.key("bundle.json") == "releases/bundle.json"

    def test_bucket_only(self) -> None:
        location = StoreLocation.parse("s3://evidence")
        assert location.prefix == "" and location.key("x") == "x"
        assert str(location) == "s3://evidence"

    @pytest.mark.parametrize(
        ("url", "message"),
        [
            ("/tmp/bundle", "not an object-store location"),
            ("s3://Bad_Bucket/x", "invalid bucket name"),
            ("s3://evidence/a/../b", "invalid key prefix"),
            ("s3://evidence/a//b", "invalid key prefix"),
        ],
    )
    def test_bad_locations_are_one_line(self, url: str, message: str) -> None:
        with pytest.raises(InputError, match=message) as caught:
            StoreLocation.parse(url)
        assert "\n" not in str(caught.value)

    def test_bundle_location_names_release_pod_and_bundle(self) -> None:
        root = StoreLocation.parse("s3://evidence/canary")
        at = bundle_location(root, "v2", "tap-7d9f-x1", "evidence")
        assert (
            at.key("segment-000001.jsonl") == "canary/v2/tap-7d9f-x1/evidence/segment-000001.jsonl"
        )

    def test_a_key_segment_cannot_climb(self) -> None:
        with pytest.raises(InputError, match="invalid key segment"):
            StoreLocation.parse("s3://evidence").child("..")

    def test_is_store_url(self) -> None:
        assert is_store_url("s3://b/p") and not is_store_url("b/p")
        assert not is_store_url(Path("s3:/b"))


class TestPodName:
    def test_from_environment(self) -> None:
        assert pod_name({"MCP_TAP_POD": "tap-0"}) == "tap-0"

    def test_unsafe_characters_are_replaced(self) -> None:
        assert pod_name({"MCP_TAP_POD": "a/b c"}) == "a-b-c"

    def test_hostname_without_variable(self) -> None:
        assert pod_name({}) != ""


class TestRealStore:
    def test_client_from_env_puts_and_gets(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        with seaweed_store(tmp_path) as store:
            store.make_bucket("evidence")
            for name, value in store.env.items():
                monkeypatch.setenv(name, value)
            client = client_from_env(timeout=5)
            client.put_object(Bucket="evidence", Key="a/b", Body=b"line\n")
            assert client.get_object(Bucket="evidence", Key="a/b")["Body"].read() == b"line\n"

    def test_refusal_is_translated_without_the_secret(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        with seaweed_store(tmp_path) as store:
            for name, value in store.env.items():
                monkeypatch.setenv(name, value)
            monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY + "-wrong")
            client = client_from_env(timeout=5)
            with pytest.raises(StoreError) as caught, translated("list", "s3://evidence"):
                client.list_objects_v2(Bucket="evidence")
            message = str(caught.value)
            assert message.startswith("list s3://evidence: the store answered ")
            assert SECRET_KEY not in message and "\n" not in message
