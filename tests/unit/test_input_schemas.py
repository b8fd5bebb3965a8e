"""Every input file's schema and template come from its model, and every template is
valid: its JSON (without the `//` notes) passes the model and the JSON Schema."""

from __future__ import annotations

import json

import jsonschema
import pytest

from cli.schema import INPUT_KINDS
from ledger.inputs import schemas
from ledger.inputs.schemas import KINDS, entries, json_schema, strip_notes, template


def test_the_commands_offer_every_kind():
    assert tuple(KINDS) == INPUT_KINDS


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_template_is_valid_for_its_model_and_schema(kind):
    text = template(kind)
    document = json.loads(strip_notes(text))
    KINDS[kind][0].model_validate(document)
    schema = json_schema(kind)
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(document, schema)


def _models(model, seen):
    if model in seen:
        return
    seen.add(model)
    for entry in entries(model):
        if entry.nested is not None:
            _models(entry.nested, seen)


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_field_has_a_meaning_and_the_reference_shows_it(kind):
    found: set = set()
    _models(KINDS[kind][0], found)
    reference = schemas.reference_markdown()
    for model in found:
        for entry in entries(model):
            assert entry.info.description, f"{model.__name__}.{entry.name} has no description"
            assert f"{entry.name}` |" in reference, entry.name


def test_a_template_shows_each_optional_field_beside_it():
    text = template("config")
    assert (
        '      // optional "weight": (number, default 1.0) Weight of the case in the '
        "weighted mean improvement, between 1e-06 and 1e+06." in text.splitlines()
    )
    assert '      // optional "samples_us": (array of number, in us, default null)' in text


def test_units_are_in_the_schema():
    props = json_schema("config")["$defs"]["MeasurementIn"]["properties"]
    assert props["median_us"]["unit"] == "us"


def test_near_miss_keys_are_found_at_any_depth_and_for_swapped_letters():
    assert schemas.key_warnings(
        "round", {"candidate": {"paht": "k.py"}, "measurements": [{}, {"repeat": 3}]}
    ) == [
        "round result key candidate.paht is not one the contract knows (kept as evidence); "
        "did you mean candidate.path?",
        "round result key measurements[1].repeat is not one the contract knows (kept as "
        "evidence); did you mean measurements[1].repeats?",
    ]
    assert schemas.key_warnings("round", {"candidate": {"path": "k", "paht": "k"}}) == []


def test_the_reference_expands_a_field_of_one_object_or_a_list():
    reference = schemas.reference_markdown()
    assert (
        "| `profile.case_id` | string |  | null | The planned case the profile ran. |" in reference
    )


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_optional_field_a_template_writes_says_what_leaving_it_out_does(kind):
    """A key the template writes but a file may leave out says so beside it, in a `//`
    line the reader refuses like every note (a file's JSON is the template without them)."""
    found: set = set()
    _models(KINDS[kind][0], found)
    text = template(kind)
    for model in found:
        for entry in entries(model):
            if entry.written and not entry.required:
                assert entry.left_out, f"{model.__name__}.{entry.name} has no left_out"
    for line in text.splitlines():
        if "may be left out" in line:
            assert line.lstrip().startswith('// "') and line.endswith("."), line
