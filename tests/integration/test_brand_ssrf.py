"""
Brand import's SSRF matrix with private targets NOT allowed: each case answers 422
brand_url_forbidden and nothing private is fetched. Nothing outside the machine is reached:
the tests' DNS server gives the "public" names 127.0.0.2, which the test-only
``security.test_public_addresses`` treats as public (every other loopback address stays
private), and the fixture servers' ports are let through by ``security.test_extra_ports``.
"""

import attrs
import pytest
import pytest_twisted as pt

from mailsvc.config import load
from tests.helpers.fixture_site import FixtureSite


@pt.async_yield_fixture
async def public_site():
    """A site on 127.0.0.2 (treated as public here) that redirects to private places."""
    running = FixtureSite("127.0.0.2", files={
        "/": (200, "text/html", b"<html><head><title>Public Co</title></head><body>hi</body></html>"),
    })
    yield running
    await running.stop()


@pt.async_yield_fixture
async def private_site():
    """A site on 127.0.0.1 (private) that must never be asked anything."""
    running = FixtureSite("127.0.0.1", files={"/": (200, "text/html", b"<html>secret</html>")})
    yield running
    await running.stop()


@pytest.fixture
def config(public_site, private_site, dns_server):
    dns_server.a("public.example.com", "127.0.0.2")
    dns_server.a("mixed.example.com", "127.0.0.2")
    dns_server.a("mixed.example.com", "10.0.0.7")
    dns_server.a("inside.example.com", "192.168.1.10")
    dns_server.aaaa("ula.example.com", "fd12:3456::1")
    dns_server.a("loop.example.com", "127.0.0.1")
    base = dns_server.configure(load(None, environ={}))
    assert base.security.allow_private_targets is False
    return attrs.evolve(base, security=attrs.evolve(
        base.security, test_public_addresses=("127.0.0.2/32",),
        test_extra_ports=(str(public_site.number), str(private_site.number))))


@pt.ensureDeferred
async def test_the_ssrf_matrix(api, public_site, private_site):
    _, key = await api.tenant(plan="scale", api_rate_per_sec=100000)
    public, private = public_site.number, private_site.number
    # The "public" site itself is read: the setting works and the port is let through.
    code, result, _ = await api.json("POST", "/brand/import", key,
                                     json={"url": f"http://public.example.com:{public}/", "ai": False})
    assert code == 200 and result["name"] == "Public Co", result
    public_site.seen.clear()

    redirects = {
        "/to-loopback": f"http://127.0.0.1:{private}/",
        "/to-name": f"http://loop.example.com:{private}/",
        "/to-metadata": "http://169.254.169.254/latest/meta-data/",
        "/to-port": f"http://public.example.com:{public + 1 if public < 65535 else 1}/",
    }
    for path, target in redirects.items():
        public_site.files[path] = (302, target, b"")
    cases = [
        ("loopback", f"http://127.0.0.1:{private}/"),
        ("loopback by name", f"http://loop.example.com:{private}/"),
        ("RFC 1918", "http://10.1.2.3/"),
        ("RFC 1918 by name", "https://inside.example.com/"),
        ("link-local", "http://169.254.10.1/"),
        ("cloud metadata", "http://169.254.169.254/latest/meta-data/"),
        ("CGNAT", "http://100.64.0.1/"),
        ("v4-mapped v6", f"http://[::ffff:127.0.0.1]:{private}/"),
        ("ULA", "http://[fd00::1]/"),
        ("ULA by name", "https://ula.example.com/"),
        ("a port other than 80/443", "http://public.example.com:8080/"),
        ("a port other than 80/443 on https", "https://public.example.com:8443/"),
        ("another scheme", "ftp://public.example.com/"),
        ("one public and one private A record", f"http://mixed.example.com:{public}/"),
        ("redirect to loopback", f"http://public.example.com:{public}/to-loopback"),
        ("redirect to a private name", f"http://public.example.com:{public}/to-name"),
        ("redirect to the metadata address", f"http://public.example.com:{public}/to-metadata"),
        ("redirect to another port", f"http://public.example.com:{public}/to-port"),
    ]
    for what, url in cases:
        code, answer, _ = await api.json("POST", "/brand/import", key, json={"url": url, "ai": False})
        assert (code, answer["name"]) == (422, "brand_url_forbidden"), (what, answer)
        await _let_the_minute_pass(api, key)
    assert private_site.seen == []  # nothing private was asked anything
    # Only the redirecting pages of the public site were fetched, once each; the mixed name's
    # public address was not contacted either.
    assert sorted(public_site.seen) == sorted(redirects)


async def _let_the_minute_pass(api, key):
    """The 6-a-minute limit is tested on its own: forget this account's imports."""
    await api.parts.db.execute("DELETE FROM minute_window WHERE kind = 'brand_import'")
