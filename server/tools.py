"""The ten MCP tools, one per engine operation (`memory.operations`).

Each tool advertises the operation's own argument and result models as its input
and output schemas, made compact (`schemas`), so every limit is in the schema; it
hands the arguments to the engine's method of the same name, which validates them
into the same model, so a bad argument comes back as a tool error carrying the
engine's message: the field, what is wrong and the limit.
"""

from __future__ import annotations

import json
import types
from typing import Any, Union, get_args, get_origin

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import UnexpectedToolError
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase, FuncMetadata
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field, create_model

from memory import ChronomemError
from memory.operations import OPERATIONS, Operation

from .access import NotAuthorized, scope_for
from .schemas import input_schema, output_schema
from .text import render

__all__ = ["OperationTool", "build_tools"]


def annotations_of(operation: Operation[Any, Any]) -> ToolAnnotations:
    """readOnlyHint and idempotentHint default to false: a write says only what differs."""
    if not operation.writes:
        return ToolAnnotations(readOnlyHint=True, openWorldHint=False)
    if operation.idempotent:
        return ToolAnnotations(destructiveHint=False, idempotentHint=True, openWorldHint=False)
    return ToolAnnotations(destructiveHint=False, openWorldHint=False)


class OperationTool(Tool):
    """A tool that runs one engine operation with the arguments exactly as sent."""

    operation: Any = Field(exclude=True)  # Operation: a dataclass pydantic need not check
    list_arguments: frozenset[str] = Field(exclude=True)

    @classmethod
    def of(cls, operation: Operation[Any, Any]) -> OperationTool:
        async def never_called(**_: Any) -> None:  # `run` below answers every call
            raise NotImplementedError

        fields = operation.arguments.model_fields
        return cls(
            fn=never_called,
            name=operation.name,
            description=operation.description,
            parameters=input_schema(operation.arguments),
            # The SDK reads only the output schema from here; the arguments are
            # validated by the engine, against the model the input schema comes from.
            fn_metadata=FuncMetadata(
                arg_model=create_model(f"{operation.name}_arguments", __base__=ArgModelBase),
                output_schema=output_schema(operation.result),
            ),
            is_async=True,
            annotations=annotations_of(operation),
            operation=operation,
            list_arguments=frozenset(
                name for name, info in fields.items() if _takes_a_list(info.annotation)
            ),
        )

    async def run(
        self,
        arguments: dict[str, Any],
        context: Context[Any, Any],
        convert_result: bool = False,
    ) -> CallToolResult:
        operation: Operation[Any, Any] = self.operation
        names = operation.signature.parameters
        unknown = sorted(set(arguments) - set(names))
        if unknown:
            name = unknown[0] if len(unknown[0]) <= 60 else unknown[0][:60] + "…"
            return _tool_error(
                f"{name}: is not an argument of {operation.name}; it takes {', '.join(names)}"
            )
        # Absent optional arguments take the engine's defaults; absent required ones
        # reach the engine as None, which names them as required.
        given = {
            name: self._as_meant(name, arguments.get(name))
            for name in names
            if arguments.get(name) is not None or name in operation.required
        }
        try:
            scope = scope_for(context.request_context, write=operation.writes)
            result: BaseModel = await getattr(scope, operation.name)(**given)
        except (ChronomemError, NotAuthorized) as exc:  # bad input, memory full, damaged file
            return _tool_error(str(exc))
        except Exception as exc:  # a bug: the SDK logs it and the client learns nothing of it
            raise UnexpectedToolError(f"Error executing tool {operation.name}") from exc
        # Many clients give the model only the text block: it carries the same information
        # as `structuredContent`, rendered for a model to read rather than a second copy of
        # the JSON (`text.render`).
        return CallToolResult(
            content=[TextContent(type="text", text=render(result))],
            structured_content=result.model_dump(mode="json"),
        )

    def _as_meant(self, name: str, value: Any) -> Any:
        """A list sent as its JSON text, as some clients do, decoded; any other value as
        sent (an entity named "null" stays a string)."""
        if name in self.list_arguments and isinstance(value, str):
            try:
                decoded = json.loads(value)
            except (ValueError, RecursionError):  # not JSON, or JSON too deep to read
                return value
            return decoded if isinstance(decoded, list) else value
        return value


def _takes_a_list(annotation: Any) -> bool:
    if get_origin(annotation) is list:
        return True
    if get_origin(annotation) in (Union, types.UnionType):
        return any(_takes_a_list(option) for option in get_args(annotation))
    return False


def _tool_error(message: str) -> CallToolResult:
    """A tool error (`isError: true`) whose text is exactly the engine's message."""
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)


def build_tools() -> list[Tool]:
    return [OperationTool.of(operation) for operation in OPERATIONS.values()]
