"""The CI outputs checked against their published schemas: JUnit.xsd and SARIF 2.1.0
(tests/data/schemas)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import orjson
import xmlschema

SCHEMAS = Path(__file__).parents[1] / "data" / "schemas"


@cache
def _junit_schema() -> xmlschema.XMLSchema:
    return xmlschema.XMLSchema(str(SCHEMAS / "JUnit.xsd"))


@cache
def _sarif_validator() -> jsonschema.Draft4Validator:
    schema = orjson.loads((SCHEMAS / "sarif-schema-2.1.0.json").read_bytes())
    return jsonschema.Draft4Validator(schema)


def junit(text: str) -> ET.Element:
    """Validate JUnit XML against the XSD and return its one testsuite."""
    _junit_schema().validate(text)
    suites = ET.fromstring(text)
    (suite,) = suites
    return suite


def sarif(text: str) -> dict[str, Any]:
    """Validate a SARIF log against the 2.1.0 schema and return its one run."""
    log = orjson.loads(text)
    _sarif_validator().validate(log)
    (only,) = log["runs"]
    run_: dict[str, Any] = only
    return run_


def failures(suite: ET.Element) -> dict[str, ET.Element]:
    """The failure element of every failed test case, by case name."""
    return {case.get("name", ""): f for case in suite.iter("testcase")
            for f in case.iter("failure")}

