"""
The router's URL map compiles a rule's URL builders once per process (mailsvc.http.rulemap):
a second router with the same routes compiles none, and each still matches and builds its own
URLs, through its own converters, as werkzeug's map does.
"""

from twisted.internet import task
from werkzeug.routing import Map, Rule

from mailsvc.http.access import access_kinds
from mailsvc.http.router import PUBLIC, Router, route
from mailsvc.http.rulemap import SharedBuilderMap, compiled_builders


class Things:
    @route("GET", "/rulemap-things/<thing_id>", access=PUBLIC, native=True)
    async def one(self, request, caller, thing_id):
        return {"id": thing_id}

    @route("GET", "/rulemap-files/<path:key>", access=PUBLIC)
    async def file(self, request, caller, key):
        return {"key": key}


def _router() -> Router:
    router = Router(task.Clock(), access_kinds(keyring=None, limiter=None, operator_token="op"))
    router.mount(Things())
    return router


def test_a_second_router_with_the_same_routes_compiles_no_builder():
    first = _router()
    compiled = compiled_builders()
    second = _router()
    assert compiled_builders() == compiled
    # Another route is compiled once, whichever map takes it first.
    first.app.url_map.add(Rule("/rulemap-other/<n>", endpoint="other"))
    assert compiled_builders() == compiled + 2  # with and without extra query arguments
    second.app.url_map.add(Rule("/rulemap-other/<n>", endpoint="other"))
    assert compiled_builders() == compiled + 2
    for router in (first, second):
        urls = router.app.url_map.bind("api.test")
        assert urls.match("/v1/rulemap-things/t1") == ("GET /v1/rulemap-things/<thing_id>", {"thing_id": "t1"})
        assert urls.build("GET /rulemap-things/<thing_id>", {"thing_id": "a b"}) == "/rulemap-things/a%20b"
        assert urls.build("GET /rulemap-files/<path:key>", {"key": "a/b c"}) == "/rulemap-files/a/b%20c"
        assert urls.build("other", {"n": 3, "page": 2}) == "/rulemap-other/3?page=2"


def test_each_map_builds_with_its_own_converters():
    class Upper:
        def __init__(self, map, *args, **kwargs):
            self.map, self.regex, self.part_isolating, self.weight = map, "[^/]+", True, 100

        def to_python(self, value):
            return value

        def to_url(self, value):
            return value.upper()

    plain = SharedBuilderMap([Rule("/rulemap-codes/<code>", endpoint="code")])
    upper = SharedBuilderMap([Rule("/rulemap-codes/<code>", endpoint="code")], converters={"default": Upper})
    assert plain.bind("api.test").build("code", {"code": "ab"}) == "/rulemap-codes/ab"
    assert upper.bind("api.test").build("code", {"code": "ab"}) == "/rulemap-codes/AB"


def test_a_rule_with_defaults_builds_as_werkzeug_builds_it():
    rules = [Rule("/rulemap-pages/", defaults={"page": 1}, endpoint="pages"),
             Rule("/rulemap-pages/<int:page>", endpoint="pages")]
    ours, werkzeugs = SharedBuilderMap(rules), Map([Rule(r.rule, **r.get_empty_kwargs()) for r in rules])
    for urls in (ours.bind("api.test"), werkzeugs.bind("api.test")):
        assert urls.build("pages", {"page": 1}) == "/rulemap-pages/"
        assert urls.build("pages", {"page": 7}) == "/rulemap-pages/7"
        assert urls.match("/rulemap-pages/7") == ("pages", {"page": 7})
