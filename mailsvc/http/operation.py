"""
What the OpenAPI document says of a route beside what the router knows of it (its path, access and
surface): an ``Operation`` given to its ``@route`` as ``op=``, and the JSON Schema pieces its request
and replies are built of. ``mailsvc.http.schemas`` holds the named schemas several resources share.
"""

from __future__ import annotations

from typing import Any

import attrs

STR = {"type": "string"}
INT = {"type": "integer"}
BOOL = {"type": "boolean"}
UUID = {"type": "string", "format": "uuid"}
OBJECT = {"type": "object"}
NULLABLE_STR = {"type": ["string", "null"]}
STR_OR_LIST = {"oneOf": [STR, {"type": "array", "items": STR}]}


def obj(required: tuple[str, ...] = (), /, **properties: Any) -> dict:
    """An object with these properties (others allowed: the SDKs ignore unknown keys)."""
    schema: dict = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    return schema


def listing(item: dict = OBJECT) -> dict:
    """The list envelope of every list endpoint."""
    return obj(("object", "has_more", "data"), object={"const": "list"}, has_more=BOOL,
               data={"type": "array", "items": item})


def ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


#: Pagination query parameters; the service answers 422 outside them.
PAGE = (("limit", {"type": "integer", "minimum": 1, "maximum": 100}), ("after", UUID), ("before", UUID))
RESOURCE = obj(("object", "id"), object=STR, id=STR)  # the {object, id} reply of a write
ID = obj(("id",), id=STR)
DELETED = obj(("object", "id", "deleted"), object=STR, id=STR, deleted={"const": True})
NULLABLE_INT = {"type": ["integer", "null"]}
LIST_ONLY = obj(("object", "has_more", "data"), object={"const": "list"}, has_more={"const": False})
NUMBER = {"type": "number"}
NULLABLE_UUID = {"type": ["string", "null"], "format": "uuid"}
NULLABLE_ISO = {"type": ["string", "null"]}


@attrs.frozen
class Operation:
    """What one route takes and gives beside what the router knows (its path, access, surface)."""

    summary: str
    request: dict | None = None  # JSON request body schema; None: none read
    responses: dict = attrs.Factory(lambda: {200: OBJECT})  # status → JSON schema (None: no body)
    native_responses: dict | None = None  # the /v1 route's replies when they differ
    query: tuple[tuple[str, dict], ...] = ()
    headers: tuple[tuple[str, dict], ...] = ()
    main_only_headers: tuple[str, ...] = ()  # headers the /v1 route ignores (its batch is always atomic)
    errors: tuple[int, ...] = ()  # statuses beside those every route of its kind may answer
    content_type: str = "application/json"  # of the success replies
    also: tuple[str, ...] = ()  # other content types a success may have (an export's CSV)
