"""Every input file's JSON Schema, template and reference, derived from the input models
(ledger/inputs/models.py), never written by hand: a field's meaning and unit are its
`described(...)`, its type and default its annotation.

    json_schema(kind)     the JSON Schema (pydantic's, with each field's description and unit)
    template(kind)        a minimal valid example: the required fields (and those with an
                          example) with their example values, every other field beside them
                          as a `//` comment line saying its type, unit, default and meaning;
                          without the comment lines it is the JSON the model accepts
    reference_markdown()  each kind's template and a table of every field (docs/inputs.md,
                          the skill's references/inputs.md)
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from ledger.errors import InputError, InputProblems
from ledger.inputs import models

KINDS: dict[str, tuple[type[BaseModel], str]] = {
    "config": (models.RunConfig, "the run configuration `plan --config` reads"),
    "round": (models.RoundResult, "a round result `record --result` reads"),
    "manifest": (models.RunManifest, "a correctness manifest (Run Manifest v1)"),
    "case-matrix": (models.CaseMatrix, "the case matrix a manifest names as `case-matrix`"),
    "measurements": (models.NoiseFile, "an A/A remeasure `noise --measurements` reads"),
    "decide": (models.DecideInput, "one input object of `decide --input`"),
}
"""Each kind of input file: its model and what reads it."""


def model_of(kind: str) -> type[BaseModel]:
    if kind not in KINDS:
        raise InputError(f"no input kind {kind!r}; the kinds are {', '.join(KINDS)}")
    return KINDS[kind][0]


def json_schema(kind: str) -> dict[str, Any]:
    """The JSON Schema of one kind of input file."""
    model = model_of(kind)
    schema = model.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = f"kernel-ledger {kind}"
    return schema


# --- walking the fields ------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """One field of a model, as the template and the reference show it."""

    name: str
    info: FieldInfo
    nested: type[BaseModel] | None  # the model of its value (or of each item)
    many: bool  # a list of `nested`

    @property
    def required(self) -> bool:
        return self.info.is_required()

    @property
    def example(self) -> Any:
        examples = self.info.examples
        return examples[0] if examples else PydanticUndefined

    @property
    def written(self) -> bool:
        """Whether the template writes it (required, or optional with an example)."""
        return self.required or self.example is not PydanticUndefined

    @property
    def unit(self) -> str | None:
        extra = self.info.json_schema_extra
        return extra.get("unit") if isinstance(extra, dict) else None  # type: ignore[return-value]

    @property
    def left_out(self) -> str | None:
        """What happens when an optional field the template writes is left out."""
        extra = self.info.json_schema_extra
        if isinstance(extra, models.Rows):
            return extra.left_out
        return extra.get("left_out") if isinstance(extra, dict) else None  # type: ignore[return-value]

    @property
    def note(self) -> str | None:
        """What the template says beside a field it writes (`models.described`)."""
        extra = self.info.json_schema_extra
        return extra.get("note") if isinstance(extra, dict) else None  # type: ignore[return-value]

    @property
    def default(self) -> str:
        if self.required:
            return "required"
        return json.dumps(self.info.default)


def entries(model: type[BaseModel]) -> Iterator[Entry]:
    for name, info in model.model_fields.items():
        nested, many = models.nested_model(info)
        yield Entry(name, info, nested, many)


def _type_words(schema: dict[str, Any]) -> str:
    if "enum" in schema:
        return "one of " + ", ".join(json.dumps(v) for v in schema["enum"])
    if "anyOf" in schema:
        kinds = [_type_words(s) for s in schema["anyOf"] if s.get("type") != "null"]
        return " or ".join(kinds)
    kind = schema.get("type")
    if kind == "array":
        items = schema.get("items", {})
        inner = "object" if "$ref" in items else _type_words(items) if items else "value"
        return f"array of {inner}"
    if kind == "object" and "additionalProperties" in schema:
        values = schema["additionalProperties"]
        if isinstance(values, dict) and values.get("type"):
            return f"object of {_type_words(values)}"
    if "$ref" in schema:
        return "object"
    return str(kind or "value")


def type_words(model: type[BaseModel], name: str) -> str:
    """The field's JSON type in words (`number`, `array of object`, `one of "a", "b"`)."""
    prop = model.model_json_schema()["properties"][name]
    return _type_words(prop)


def _prose(model: type[BaseModel], entry: Entry) -> str:
    bits = [type_words(model, entry.name)]
    if entry.unit:
        bits.append(f"in {entry.unit}")
    bits.append(entry.default if entry.required else f"default {entry.default}")
    return f"({', '.join(bits)}) {entry.info.description or ''}".strip()


# --- near-miss keys ----------------------------------------------------------------------

WHAT = {
    "config": "config",
    "round": "round result",
    "manifest": "manifest",
    "case-matrix": "case matrix",
    "measurements": "measurements file",
    "decide": "decide input",
}
"""How a warning names each kind of file."""


def near_misses(model: type[BaseModel], document: Any, prefix: str = "") -> Iterator[tuple]:
    """(path written, path meant) of every key anywhere in `document` that the model at
    its place does not know but that is close to one it does (and is not there too)."""
    if not isinstance(document, dict):
        return
    known = {e.name: e for e in entries(model)}
    for key, value in document.items():
        entry = known.get(key)
        if entry is None:
            near = models.nearest(str(key), list(known))
            if near is not None and near not in document:
                yield f"{prefix}{key}", f"{prefix}{near}"
            continue
        if entry.nested is None:
            continue
        if isinstance(value, list):
            for index, item in enumerate(value):
                yield from near_misses(entry.nested, item, f"{prefix}{key}[{index}].")
        else:
            yield from near_misses(entry.nested, value, f"{prefix}{key}.")


def key_warnings(kind: str, document: Any) -> list[str]:
    """The warning for each near-miss key of a `kind` file (kept as evidence)."""
    return [
        f"{WHAT[kind]} key {written} is not one the contract knows (kept as evidence); "
        f"did you mean {meant}?"
        for written, meant in near_misses(model_of(kind), document)
    ]


def refuse_strictly(kind: str, shown: str, warnings: list[str]) -> None:
    """`--strict`: the near-miss keys of a file refuse it, every one listed."""
    if warnings:
        raise InputProblems(f"{WHAT[kind]} {shown} refused by --strict", warnings)


# --- the template ------------------------------------------------------------------------


def _value(entry: Entry, indent: str) -> str:
    """The template's value of a written field: its example, or its model's template."""
    if entry.nested is None or entry.example is not PydanticUndefined:
        return _dumps(entry.example, indent)
    if not entry.many:
        return _object(entry.nested, indent)
    return f"[\n{indent}  {_object(entry.nested, indent + '  ')}\n{indent}]"


def _dumps(value: Any, indent: str) -> str:
    text = json.dumps(value, indent=2, ensure_ascii=False)
    return text.replace("\n", "\n" + indent)


def _object(model: type[BaseModel], indent: str) -> str:
    inner = indent + "  "
    written = [e for e in entries(model) if e.written]
    lines = []
    for i, e in enumerate(written):
        comma = "," if i < len(written) - 1 else ""
        lines.append(f"{inner}{json.dumps(e.name)}: {_value(e, inner)}{comma}")
        if not e.required and e.left_out:
            lines.append(f"{inner}// {json.dumps(e.name)} may be left out: {e.left_out}.")
        if e.note:
            lines.append(f"{inner}// {json.dumps(e.name)}: {e.note}.")
    for e in entries(model):
        if not e.written:
            lines += _notes(model, e, f"{inner}// optional ", f"{inner}//   ")
    return "{\n" + "\n".join(lines) + f"\n{indent}}}"


def _notes(model: type[BaseModel], entry: Entry, first: str, then: str) -> list[str]:
    """The `//` lines of an optional field: its prose and, for an object (or a list of
    them), every key of that object beneath it, one deeper."""
    line = f"{first}{json.dumps(entry.name)}: {_prose(model, entry)}"
    if entry.nested is None:
        return [line]
    lines = [line + (" Each item's keys:" if entry.many else " Its keys:")]
    for e in entries(entry.nested):
        lines += _notes(entry.nested, e, then, then + "  ")
    return lines


def template(kind: str) -> str:
    """A minimal valid example of `kind`, each optional field beside it as a `//` line."""
    model = model_of(kind)
    head = (
        f"// {kind}: {KINDS[kind][1]}. Lines starting with // are notes on the format, "
        "not JSON: drop them.\n"
    )
    return head + _object(model, "") + "\n"


def strip_notes(text: str) -> str:
    """A template without its `//` note lines: the JSON it stands for."""
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//"))


# --- the reference -----------------------------------------------------------------------


def _rows(model: type[BaseModel], prefix: str) -> Iterator[list[str]]:
    for e in entries(model):
        path = f"{prefix}{e.name}"
        yield [
            f"`{path}`",
            type_words(model, e.name),
            e.unit or "",
            e.default,
            " ".join((e.info.description or "").split()),
        ]
        if e.nested is not None:
            yield from _rows(e.nested, f"{path}[]." if e.many else f"{path}.")


def reference_markdown(heading: str = "##") -> str:
    """Every kind: what reads it, its template, and a table of every field."""
    out: list[str] = []
    for kind, (model, what) in KINDS.items():
        doc = " ".join((model.__doc__ or "").split())
        out += [f"{heading} {kind}", "", f"{what[:1].upper()}{what[1:]}. {doc}", ""]
        out += [
            f"`kernel-ledger template {kind}`, `kernel-ledger schema {kind}`:",
            "",
            "```jsonc",
            template(kind).rstrip("\n"),
            "```",
            "",
        ]
        out += ["| field | type | unit | default | meaning |", "|---|---|---|---|---|"]
        for row in _rows(model, ""):
            out.append("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |")
        out.append("")
    return "\n".join(out)
