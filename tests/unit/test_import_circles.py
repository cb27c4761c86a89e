"""
No import circle between the modules of mailsvc/ (docs/architecture.md, "Layers"), imports kept
for type checking only included: a circle is two modules that each need the other, which the
layer contract cannot see inside one package.
"""

import grimp


def _circles(graph) -> list[list[str]]:
    found, done = [], set()

    def visit(module: str, path: list[str], on_path: set[str]) -> None:
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            if imported in on_path:
                found.append(path[path.index(imported):] + [imported])
            elif imported not in done:
                on_path.add(imported)
                visit(imported, [*path, imported], on_path)
                on_path.discard(imported)
        done.add(module)

    for module in sorted(graph.modules):
        if module not in done:
            visit(module, [module], {module})
    return found


def test_no_module_of_mailsvc_imports_one_that_imports_it_back():
    circles = _circles(grimp.build_graph("mailsvc"))
    assert circles == [], "import circles:\n" + "\n".join(" -> ".join(c) for c in circles)


def test_the_search_finds_a_circle():
    class Graph:
        modules = {"a", "b", "c"}
        imports = {"a": {"b"}, "b": {"c"}, "c": {"a"}}

        def find_modules_directly_imported_by(self, module):
            return self.imports[module]

    assert _circles(Graph()) == [["a", "b", "c", "a"]]
