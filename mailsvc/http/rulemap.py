"""
The router's Klein application on a URL map that compiles each rule's URL builders once per
process (docs/decisions.md, "Compiled URL builders").

Binding a werkzeug rule to its map writes two Python functions (building the rule's URL with and
without extra query arguments) and compiles them: about 1.5 ms a rule, and a node mounts some
400 rules, so it was most of the time assembling an application takes (a daemon's start, each
test that assembles one). A builder's code depends only on what the rule is compiled from (its
parts, static and dynamic, and its defaults) and reads the rule's own converters and query
encoding when it is called, so rules alike in those share one compiled builder; each is still
bound to its own rule, and every map keeps its own rules, converters and matcher.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from klein import Klein
from werkzeug.routing import Map, Rule, RuleFactory

#: Compiled builders, by what their code is written from. Bounded by the rules the code mounts.
_BUILDERS: dict[Hashable, Callable[..., tuple[str, str]]] = {}


class SharedBuilderRule(Rule):
    """A rule whose URL builders are compiled once per process for every rule alike (above)."""

    @classmethod
    def like(cls, rule: Rule) -> SharedBuilderRule:
        """An unbound copy of ``rule`` (werkzeug's ``empty``, with the options it leaves out)."""
        return cls(rule.rule, **rule.get_empty_kwargs(), merge_slashes=rule.merge_slashes,
                   websocket=rule.websocket)

    def builder_key(self, append_unknown: bool) -> Hashable | None:
        """What this rule's builder is written from (None: not shared, the rule has defaults)."""
        if self.defaults:  # their values are written into the code, through the converters
            return None
        return self.rule, tuple(self._trace), append_unknown

    def _compile_builder(self, append_unknown: bool = True) -> Callable[..., tuple[str, str]]:
        # werkzeug's step of ``compile`` that writes and compiles one builder.
        key = self.builder_key(append_unknown)
        if key is None:
            return super()._compile_builder(append_unknown)
        builder = _BUILDERS.get(key)
        if builder is None:
            builder = _BUILDERS[key] = super()._compile_builder(append_unknown)
        return builder


def compiled_builders() -> int:
    """How many builders this process has compiled and shares."""
    return len(_BUILDERS)


class SharedBuilderMap(Map):
    """A map whose every rule shares its compiled builders (``SharedBuilderRule``)."""

    def add(self, rulefactory: RuleFactory) -> None:
        for rule in rulefactory.get_rules(self):
            if type(rule) is Rule:
                rule = SharedBuilderRule.like(rule)
            super().add(rule)


class RouterApp(Klein):
    """Klein on a ``SharedBuilderMap``: its routes are added, matched and dispatched as Klein's own."""

    def __init__(self, **map_options: Any) -> None:
        super().__init__()
        #: Klein's map of rules (its documented ``_url_map``, read back through ``url_map``).
        self._url_map = SharedBuilderMap(**map_options)
