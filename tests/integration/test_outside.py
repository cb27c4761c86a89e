"""The one check of outside addresses (dns.public) and the one outbound HTTP client (fetch)."""

import ipaddress

import pytest
import pytest_twisted as pt
from twisted.internet import defer, reactor, task
from twisted.internet.protocol import Factory
from twisted.names.error import DNSQueryTimeoutError

from mailsvc.dns.resolver import build_resolver, system_servers
from mailsvc.outside.addresses import PublicAddresses, TargetRefused, Unresolvable, refusal
from mailsvc.outside.fetch import Fetcher, FetchFailed
from tests.helpers.outside import Reply


@pytest.mark.parametrize(
    "address, why",
    [
        ("8.8.8.8", None),
        ("2606:4700::1111", None),
        ("127.0.0.1", "a loopback address"),
        ("::1", "a loopback address"),
        ("10.1.2.3", "a private address"),
        ("172.16.0.1", "a private address"),
        ("192.168.1.1", "a private address"),
        ("fc00::1", "a private address"),
        ("169.254.169.254", "a link-local address"),
        ("fe80::1", "a link-local address"),
        ("100.64.0.1", "a shared (carrier-grade NAT) address"),
        ("224.0.0.1", "a multicast address"),
        ("ff02::1", "a multicast address"),
        ("0.0.0.0", "an unspecified address"),
        ("::", "an unspecified address"),
        ("240.0.0.1", "a private address"),
        ("192.0.2.1", "a private address"),
        ("::ffff:127.0.0.1", "an IPv4-mapped IPv6 address"),
        ("::ffff:8.8.8.8", "an IPv4-mapped IPv6 address"),
        ("2002:7f00:1::", "an IPv6 address embedding a non-public IPv4 address"),
        ("64:ff9b::a00:1", "a reserved address"),
    ],
)
def test_only_public_unicast_addresses_pass(address, why):
    assert refusal(ipaddress.ip_address(address)) == why


def _addresses(dns_server, allow_private=False) -> PublicAddresses:
    return PublicAddresses(reactor, build_resolver(reactor, (dns_server.address,)), allow_private)


@pt.ensureDeferred
async def test_names_are_resolved_once_and_every_address_checked(dns_server):
    dns_server.a("public.example.com", "8.8.8.8")
    dns_server.aaaa("public.example.com", "2606:4700::1111")
    dns_server.a("inside.example.com", "10.0.0.5")
    dns_server.a("mixed.example.com", "8.8.4.4")
    dns_server.aaaa("mixed.example.com", "::1")
    dns_server.cname("alias.example.com", "inside.example.com")
    dns_server.aaaa("mapped.example.com", "::ffff:127.0.0.1")
    dns_server.a("local.example.com", "127.0.0.1")
    public = _addresses(dns_server)

    assert str(await public.check("public.example.com")) == "8.8.8.8"  # IPv4 first
    assert str(await public.check("PUBLIC.example.com.")) == "8.8.8.8"
    for name, why in [
        ("inside.example.com", "10.0.0.5) is a private address"),
        ("mixed.example.com", "(::1) is a loopback address"),
        ("alias.example.com", "(10.0.0.5) is a private address"),
        ("mapped.example.com", "is an IPv4-mapped IPv6 address"),
        ("local.example.com", "is a loopback address"),
    ]:
        with pytest.raises(TargetRefused) as refused:
            await public.check(name)
        assert why in refused.value.message, (name, refused.value.message)
    with pytest.raises(Unresolvable):
        await public.check("nowhere.example.com")

    # Literals are checked without a lookup.
    asked = len(dns_server.queries)
    assert str(await public.check("8.8.8.8")) == "8.8.8.8"
    for literal in ("127.0.0.1", "[::1]", "[::ffff:10.0.0.1]", "169.254.169.254", "100.64.1.1"):
        with pytest.raises(TargetRefused):
            await public.check(literal)
    assert len(dns_server.queries) == asked

    # The test knob lifts the address rule, not the lookup.
    relaxed = _addresses(dns_server, allow_private=True)
    assert str(await relaxed.check("local.example.com")) == "127.0.0.1"
    assert str(await relaxed.check("alias.example.com")) == "10.0.0.5"
    with pytest.raises(Unresolvable):
        await relaxed.check("nowhere.example.com")


@pt.ensureDeferred
async def test_answers_are_kept_for_their_ttl_and_lookups_shared(dns_server):
    dns_server.a("hooks.example.com", "8.8.8.8")
    clock = task.Clock()
    public = PublicAddresses(clock, build_resolver(reactor, (dns_server.address,)))
    at_once = [defer.ensureDeferred(public.check("hooks.example.com")) for _ in range(20)]
    assert {str(a) for a in await defer.gatherResults(at_once)} == {"8.8.8.8"}
    assert len(dns_server.queries) == 2  # one A and one AAAA query for all twenty
    dns_server.remove("hooks.example.com")
    dns_server.a("hooks.example.com", "10.0.0.1")
    clock.advance(29)
    assert str(await public.check("hooks.example.com")) == "8.8.8.8"
    assert len(dns_server.queries) == 2
    clock.advance(1)  # kept for min(TTL 60 s, 30 s)
    with pytest.raises(TargetRefused):
        await public.check("hooks.example.com")
    assert len(dns_server.queries) == 4


class _SilentDns:
    """A resolver whose server never answers."""

    def lookupAddress(self, name, timeout=None):  # noqa: N802
        return defer.fail(DNSQueryTimeoutError(name))

    lookupIPV6Address = lookupAddress  # noqa: N815


@pt.ensureDeferred
async def test_a_name_whose_dns_does_not_answer_is_unresolvable():
    with pytest.raises(Unresolvable) as failed:
        await PublicAddresses(reactor, _SilentDns()).check("hooks.example.com")
    assert "did not answer" in failed.value.message


def _fetcher(dns_server, ca_file="", allow_private=True) -> Fetcher:
    return Fetcher(reactor, _addresses(dns_server, allow_private), ca_file)


@pytest.fixture
def ca_file(ca, tmp_path):
    return ca.write(tmp_path / "ca.pem")


@pt.ensureDeferred
async def test_https_to_the_checked_address_with_a_verified_certificate(dns_server, https_receiver, ca_file):
    dns_server.a("hooks.example.com", "127.0.0.1")
    fetcher = _fetcher(dns_server, ca_file)
    receiver = https_receiver.receiver
    receiver.default = Reply(200, {"Content-Type": "text/plain", "X-Seen": "yes"}, b"hello")
    url = f"https://hooks.example.com:{https_receiver.number}/in?x=1"
    try:
        asked = len(dns_server.queries)
        fetched = await fetcher.get(url, 1000, 5)
        assert (fetched.status, fetched.body, fetched.headers["x-seen"]) == (200, b"hello", "yes")
        status, headers, body = fetched  # the tuple the attachment feature unpacks
        assert status == 200
        # One lookup (A and AAAA) for the check; nothing resolves the name again.
        assert len(dns_server.queries) - asked == 2
        request = receiver.received[0]
        assert request.headers["host"] == f"hooks.example.com:{https_receiver.number}"
        assert request.path == "/in" and request.headers["user-agent"].startswith("mailsvc/")

        posted = await fetcher.post(url, b'{"a":1}', {"Content-Type": "application/json"}, 1000, 5)
        assert posted.status == 200
        assert receiver.received[1].method == "POST" and receiver.received[1].body == b'{"a":1}'

        # An IP literal is verified against the certificate's IP address.
        fetched = await fetcher.get(f"https://127.0.0.1:{https_receiver.number}/", 1000, 5)
        assert fetched.status == 200
    finally:
        await fetcher.close()


@pt.ensureDeferred
async def test_certificates_are_verified(dns_server, https_receiver, ca_file):
    dns_server.a("hooks.example.com", "127.0.0.1")
    dns_server.a("other.example.com", "127.0.0.1")
    untrusting = _fetcher(dns_server, "")  # the test CA is not in the system's trust store
    trusting = _fetcher(dns_server, ca_file)
    try:
        with pytest.raises(FetchFailed) as failed:
            await untrusting.get(f"https://hooks.example.com:{https_receiver.number}/", 1000, 5)
        assert failed.value.reason == "tls"
        with pytest.raises(FetchFailed) as failed:  # a certificate for another name
            await trusting.get(f"https://other.example.com:{https_receiver.number}/", 1000, 5)
        assert failed.value.reason == "tls"
        assert https_receiver.receiver.received == []
    finally:
        await untrusting.close()
        await trusting.close()


@pt.ensureDeferred
async def test_refused_targets_are_never_contacted(dns_server, https_receiver, ca_file):
    dns_server.a("hooks.example.com", "127.0.0.1")
    dns_server.a("inside.example.com", "192.168.10.10")
    strict = _fetcher(dns_server, ca_file, allow_private=False)
    port = https_receiver.number
    try:
        for url, reason in [
            (f"https://hooks.example.com:{port}/", "private_address"),
            (f"https://127.0.0.1:{port}/", "private_address"),
            (f"https://[::ffff:127.0.0.1]:{port}/", "private_address"),
            ("https://169.254.169.254/latest/meta-data", "private_address"),
            ("https://inside.example.com/", "private_address"),
            (f"http://hooks.example.com:{port}/", "scheme"),
            ("ftp://hooks.example.com/", "scheme"),
            (f"https://user:pw@hooks.example.com:{port}/", "malformed"),
            ("https:///nohost", "malformed"),
        ]:
            with pytest.raises(TargetRefused) as refused:
                await strict.get(url, 1000, 5)
            assert refused.value.reason == reason, url
        with pytest.raises(TargetRefused) as refused:
            await strict.get("https://8.8.8.8:8443/", 1000, 5, ports=(443,))
        assert refused.value.reason == "port"
        with pytest.raises(FetchFailed) as failed:
            await strict.get("https://nowhere.example.com/", 1000, 5)
        assert failed.value.reason == "dns"
        assert https_receiver.receiver.received == []
    finally:
        await strict.close()


@pt.ensureDeferred
async def test_redirects_are_not_followed(dns_server, https_receiver, ca_file):
    dns_server.a("hooks.example.com", "127.0.0.1")
    fetcher = _fetcher(dns_server, ca_file)
    receiver = https_receiver.receiver
    receiver.default = Reply(302, {"Location": "https://169.254.169.254/"})
    url = f"https://hooks.example.com:{https_receiver.number}/"
    try:
        with pytest.raises(FetchFailed) as failed:
            await fetcher.get(url, 1000, 5)
        assert failed.value.reason == "redirect"
        posted = await fetcher.post(url, b"{}", {}, 1000, 5)
        assert posted.status == 302
        assert len(receiver.received) == 2  # nothing went to the Location
    finally:
        await fetcher.close()


@pt.ensureDeferred
async def test_bodies_are_read_up_to_a_limit(dns_server, https_receiver, ca_file):
    dns_server.a("hooks.example.com", "127.0.0.1")
    fetcher = _fetcher(dns_server, ca_file)
    https_receiver.receiver.default = Reply(200, {}, b"x" * 300_000)
    url = f"https://hooks.example.com:{https_receiver.number}/"
    try:
        with pytest.raises(FetchFailed) as failed:
            await fetcher.get(url, 1000, 5)
        assert failed.value.reason == "too_large"
        posted = await fetcher.post(url, b"{}", {}, 1000, 5)  # a webhook reply: the prefix is kept
        assert (posted.status, posted.body) == (200, b"x" * 1000)
        assert len((await fetcher.get(url, 300_000, 5)).body) == 300_000
    finally:
        await fetcher.close()


@pt.ensureDeferred
async def test_the_whole_exchange_has_a_deadline(dns_server, https_receiver, ca_file):
    dns_server.a("hooks.example.com", "127.0.0.1")
    fetcher = _fetcher(dns_server, ca_file)
    https_receiver.receiver.default = Reply(stall=True)
    try:
        started = reactor.seconds()
        with pytest.raises(FetchFailed) as failed:
            await fetcher.post(f"https://hooks.example.com:{https_receiver.number}/", b"{}", {}, 1000, 0.5)
        assert failed.value.reason == "timeout"
        assert reactor.seconds() - started < 3
    finally:
        await fetcher.close()


@pt.ensureDeferred
async def test_connection_failures_are_reported(dns_server, ca_file):
    dns_server.a("hooks.example.com", "127.0.0.1")
    fetcher = _fetcher(dns_server, ca_file)
    port = reactor.listenTCP(0, Factory(), interface="127.0.0.1")
    number = port.getHost().port
    await port.stopListening()
    try:
        with pytest.raises(FetchFailed) as failed:
            await fetcher.get(f"https://hooks.example.com:{number}/", 1000, 5)
        assert failed.value.reason == "connect"
    finally:
        await fetcher.close()


def test_a_bad_ca_file_is_refused(tmp_path):
    (tmp_path / "empty.pem").write_text("nothing here")
    addresses = PublicAddresses(reactor, None)
    with pytest.raises(ValueError, match="security.ca_file"):
        Fetcher(reactor, addresses, str(tmp_path / "empty.pem"))
    with pytest.raises(ValueError, match="security.ca_file"):
        Fetcher(reactor, addresses, str(tmp_path / "missing.pem"))


def test_system_servers_reads_the_nameservers_of_resolv_conf(tmp_path):
    resolv = tmp_path / "resolv.conf"
    resolv.write_text("# comment\nsearch example.com\nnameserver 192.0.2.53\nnameserver 2001:db8::53\n"
                      "nameserver\noptions edns0\n")
    assert system_servers(str(resolv)) == ("192.0.2.53", "[2001:db8::53]:53")
    resolv.write_text("search example.com\n")
    assert system_servers(str(resolv)) == ("127.0.0.1:53",)
    assert system_servers(str(tmp_path / "missing")) == ("127.0.0.1:53",)
