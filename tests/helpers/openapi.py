"""A reply's schema as the node's OpenAPI document gives it, to check a reply against."""

from mailsvc.http import openapi


def reply_schema(node, method: str, path: str, status: int = 200) -> dict:
    """
    The JSON schema of the ``status`` reply of ``method path`` (as ``@route`` spells it, a ``/v1``
    copy with its prefix) in the document of ``node``'s router, with the document's components
    beside it so that any ``$ref`` resolves.
    """
    doc = openapi.document(node.parts.router.mounted)
    operation = doc["paths"][openapi.openapi_path(path)[0]][method.lower()]
    schema = operation["responses"][str(status)]["content"]["application/json"]["schema"]
    return {**schema, "components": doc["components"]}
