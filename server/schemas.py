"""The JSON schemas the tools advertise, written for the model that reads tools/list.

Both come from the engine's own models (DESIGN §1), made compact: no titles, and
an optional value as its plain type rather than an `anyOf` with null.

- Input schemas keep every limit (lengths, bounds, item counts), the defaults and
  the field descriptions: they are the contract a model calls by. An optional
  argument is typed as its value (`"type": "string"`), not as "string or null":
  the model leaves it out to get the default.
- Output schemas keep types and structure only; what a field means is in the
  tool's description. `required` lists exactly the fields every result carries: a
  field the engine leaves out of the JSON form when null (`exclude_if`) is
  optional and typed as its non-null value, since it is never sent as null.

A definition used once is written out in place, and one used more often (the
observations of a remember result, the relations of a relate result) once under
`$defs`: clients validate every result against the output schema (the MCP Python
SDK with `jsonschema`), and each `$ref` they follow costs time, which only a
repeated definition repays in bytes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

__all__ = ["input_schema", "output_schema"]

NULL = {"type": "null"}
# What an output schema does without: names, prose, defaults and the closed-object
# flag; the types and the structure stay.
_OUTPUT_NOISE = ("title", "description", "discriminator", "default", "additionalProperties")
# Keys whose value maps names to schemas, or is one schema, or a list of schemas.
_SCHEMA_MAPS = ("properties", "$defs")
_SCHEMA_VALUES = ("items", "additionalProperties", "not")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")


def input_schema(model: type[BaseModel]) -> dict[str, Any]:
    """`model`'s schema as a tool's `inputSchema`, its required arguments first."""
    schema = _compact(model.model_json_schema(), drop=("title",))
    required = schema.get("required", [])
    properties = schema["properties"]
    schema["properties"] = {
        name: properties[name] for name in sorted(properties, key=lambda name: name not in required)
    }
    return schema


def output_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The schema of `model.model_dump(mode="json")`, as a tool's `outputSchema`."""
    schema = model.model_json_schema(mode="serialization", schema_generator=_AsSent)
    schema = _share_times(_compact(schema, drop=_OUTPUT_NOISE))
    return {key: _implied_types(value) for key, value in schema.items()}


def _implied_types(node: Any) -> Any:
    """`node` (inside an output schema) without the `type` that its `properties` or
    `items` already imply: the result is always of that type, and tools/list is read
    whole at every session's start. The root keeps its `"type": "object"`."""
    if isinstance(node, list):
        return [_implied_types(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _SCHEMA_MAPS:  # names -> schemas: a property may be named "type"
            out[key] = {name: _implied_types(item) for name, item in value.items()}
        else:
            out[key] = _implied_types(value)
    kind = out.get("type")
    implied = (
        {"object": "properties", "array": "items"}.get(kind) if isinstance(kind, str) else None
    )
    if implied is not None and implied in out:
        del out["type"]
    return out


# The fields of both time axes, which every observation and relation carries.
TIME_FIELDS = ("valid_from", "valid_to", "recorded_at", "invalidated_at", "current", "reason")


def _share_times(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with the time fields written once, under `$defs`, when two or more
    objects of it carry them (observations and relations): the same constraints,
    in fewer bytes."""
    carriers = [node for node in _objects(schema) if set(TIME_FIELDS) <= node["properties"].keys()]
    if len(carriers) < 2:
        return schema
    first = carriers[0]
    times = {
        "properties": {name: first["properties"][name] for name in TIME_FIELDS},
        "required": [name for name in first.get("required", []) if name in TIME_FIELDS],
    }
    for node in carriers:
        node["properties"] = {
            name: value for name, value in node["properties"].items() if name not in TIME_FIELDS
        }
        node["required"] = [name for name in node.get("required", []) if name not in TIME_FIELDS]
        node["allOf"] = [{"$ref": "#/$defs/times"}]
    schema.setdefault("$defs", {})["times"] = times
    return schema


def _objects(node: Any) -> Iterator[dict[str, Any]]:
    """Every object schema (one with `properties`) in `node`, outermost first."""
    if isinstance(node, dict):
        if isinstance(node.get("properties"), dict):
            yield node
        for value in node.values():
            yield from _objects(value)
    elif isinstance(node, list):
        for item in node:
            yield from _objects(item)


class _AsSent(GenerateJsonSchema):
    """The JSON form as `model_dump` writes it: every field it always writes is
    required (a default is still written), and a field left out when null is
    optional and never null."""

    def field_is_required(
        self,
        field: core_schema.ModelField | core_schema.DataclassField | core_schema.TypedDictField,
        total: bool,
    ) -> bool:
        return field.get("serialization_exclude_if") is None

    def model_field_schema(self, schema: core_schema.ModelField) -> JsonSchemaValue:
        json_schema = super().model_field_schema(schema)
        left_out = schema.get("serialization_exclude_if")
        if left_out is not None and left_out(None):
            json_schema = _not_null(json_schema)
        return json_schema


def _not_null(schema: JsonSchemaValue) -> JsonSchemaValue:
    """`schema` without its null option and its null default."""
    out = {key: value for key, value in schema.items() if key != "default" or value is not None}
    options = out.get("anyOf")
    if isinstance(options, list) and NULL in options:
        rest = [option for option in options if option != NULL]
        del out["anyOf"]
        if len(rest) == 1:
            out = {**rest[0], **out}
        else:
            out["anyOf"] = rest
    return out


def _compact(schema: dict[str, Any], drop: tuple[str, ...]) -> dict[str, Any]:
    """`schema` with optional values as their type and `drop` keys gone. A definition
    used once is written out in place; one used more often stays under `$defs`."""
    definitions = schema.get("$defs", {})
    uses = Counter(_refs(schema))
    shared = {name for name in definitions if uses[name] > 1}

    def walk(node: Any) -> Any:
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.rsplit("/", 1)[-1] not in shared:
            siblings = {key: value for key, value in node.items() if key != "$ref"}
            return walk({**definitions[ref.rsplit("/", 1)[-1]], **siblings})
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in drop or key == "$defs":
                continue
            if key in _SCHEMA_MAPS:
                out[key] = {name: walk(item) for name, item in value.items()}
            elif key in _SCHEMA_VALUES:
                out[key] = walk(value)
            elif key in _SCHEMA_LISTS:
                out[key] = [walk(item) for item in value]
            else:
                out[key] = value
        return _optional_as_its_type(out)

    out = walk(schema)
    if shared:
        out["$defs"] = {name: walk(definitions[name]) for name in sorted(shared)}
    return out


def _refs(node: Any) -> Iterator[str]:
    """The definition names every `$ref` in `node` points to, once per use."""
    if isinstance(node, dict):
        if isinstance(node.get("$ref"), str):
            yield node["$ref"].rsplit("/", 1)[-1]
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)


def _optional_as_its_type(node: dict[str, Any]) -> dict[str, Any]:
    """`{"anyOf": [T, null], "default": null, ...}` as T with the outer keys: the
    optional field is simply left out. A description on T follows the outer one."""
    options = node.get("anyOf")
    if not (isinstance(options, list) and len(options) == 2 and NULL in options):
        return node
    if node.get("default", ...) is not None:  # null is a value here, not "absent"
        (other,) = [option for option in options if option != NULL]
        if set(other) == {"type"} and isinstance(other["type"], str):
            rest = {key: value for key, value in node.items() if key != "anyOf"}
            return {**rest, "type": [other["type"], "null"]}
        return node
    (other,) = [option for option in options if option != NULL]
    rest = {key: value for key, value in node.items() if key not in ("anyOf", "default")}
    out = {**other, **rest}
    if "description" in other and "description" in rest:
        out["description"] = f"{rest['description']} {other['description']}"
    return out
