"""Failures the domain reports; the HTTP and SMTP edges map them to their own codes."""

from __future__ import annotations


class DomainError(Exception):
    """Base of every rule violation the domain layer reports."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class Invalid(DomainError):
    """A field is missing or malformed. The message starts with the field name."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


class NotFound(DomainError):
    """The resource is absent from the account (or its id cannot name one)."""

    def __init__(self, kind: str):
        super().__init__(f"{kind} not found")
        self.kind = kind


class NotAllowed(DomainError):
    """The request is well-formed but the account may not do it (paused, plan limit, ...)."""

    def __init__(self, message: str, reason: str = "forbidden"):
        super().__init__(message)
        self.reason = reason


class Conflict(DomainError):
    """The request clashes with the resource's current state (an id already taken, ...)."""
