"""
Tests reach mailsvc through what it offers (constructor arguments, public properties and
functions), not through its private names: a test that pokes ``obj._name`` breaks on any rename
and checks a state the code's users never see. A private name counts when mailsvc/ defines it
and the test module reaching it does not (a fake's own state is its own).
"""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: Private names a test module still reaches, each with why.
ALLOWED = {
    "tests/helpers/outside.py": {"_disconnected": "twisted.web's Request: whether its client went away"},
    "tests/helpers/fake_ai.py": {"_disconnected": "twisted.web's Request: whether its client went away"},
}


#: A private name of mailsvc/: a function or class, an attribute of its objects (``self._x``, set
#: there or inherited), a module global.
DEFINED = re.compile(r"^\s*(?:async\s+)?(?:def|class)\s+(_\w+)|\bself\.(_\w+)|^(_\w+)\s*[:=](?!=)", re.M)


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _scan(tree: ast.AST) -> tuple[set[str], list[tuple[int, str]]]:
    """
    The private names a test module defines (functions, classes, attributes its objects set), and
    (line, name) for every private name it reaches from outside its object: ``obj._name`` (not
    ``self`` or ``cls``), ``from mailsvc... import _name``, ``setattr(obj, "_name", ...)``.
    """
    defined: set[str] = set()
    reached: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined.add(node.name)
        elif isinstance(node, ast.Attribute):
            if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                reached.append((node.lineno, node.attr))
            elif isinstance(node.ctx, ast.Store):
                defined.add(node.attr)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("mailsvc"):
            reached.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.Call) and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant):
            called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if called in ("setattr", "getattr", "delattr") and isinstance(node.args[1].value, str):
                reached.append((node.lineno, node.args[1].value))
    return {name for name in defined if _private(name)}, [(n, name) for n, name in reached if _private(name)]


def test_the_tests_reach_no_private_name_of_mailsvc():
    of_mailsvc = {next(filter(None, m.groups())) for path in (ROOT / "mailsvc").rglob("*.py")
                  for m in DEFINED.finditer(path.read_text())}
    doors, used = [], set()
    for path in sorted((ROOT / "tests").rglob("*.py")):
        # A name the module defines itself is its own fake's (a fake sink reaching its state).
        own, reached = _scan(ast.parse(path.read_text(), str(path)))
        name_of = str(path.relative_to(ROOT))
        allowed = ALLOWED.get(name_of, {})
        doors += [f"{name_of}:{line}: {name}" for line, name in reached
                  if name in of_mailsvc and name not in own and name not in allowed]
        used |= {(name_of, name) for _, name in reached if name in allowed}
    assert not doors, "private names of mailsvc reached by tests:\n" + "\n".join(doors)
    stale = {(f, n) for f, names in ALLOWED.items() for n in names} - used
    assert not stale, f"allowed but no longer reached: take them off ALLOWED: {sorted(stale)}"


def test_the_scan_sees_each_kind_of_door():
    tree = ast.parse(
        "from mailsvc.x import _read\n"
        "engine._wake_at(3)\n"
        "self._mine = self._inherited\n"
        "old, submitter._clock = submitter._clock, clock\n"
        "monkeypatch.setattr(intake, '_parse', None)\n"
    )
    own, reached = _scan(tree)
    assert sorted(name for _, name in reached) == ["_clock", "_clock", "_parse", "_read", "_wake_at"]
    assert own == {"_mine"}
    assert {next(filter(None, m.groups())) for m in DEFINED.finditer(
        "def _a():\n    self._b, self._c = 1, 2\n_D = 3\nclass _E:\n    x._f = 1\n")} == {"_a", "_b", "_c", "_D", "_E"}
