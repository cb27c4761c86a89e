"""
The SSH manhole's settings: authorized keys writable by others let nobody in, the host key
is generated once, only loopback and unix endpoints are accepted. A real SSH client:
tests/integration/test_manhole.py.
"""


import pytest
import pytest_twisted as pt

from mailsvc import manhole
from tests.helpers.manhole import client_key


@pt.ensureDeferred
async def test_authorized_keys_writable_by_others_lets_nobody_in(tmp_path):
    _, line = client_key(tmp_path, "k")
    path = tmp_path / manhole.AUTHORIZED_KEYS
    path.write_text(line)
    path.chmod(0o600)
    assert len(list(manhole.AuthorizedKeysFile(path).getAuthorizedKeys(b"root"))) == 1
    path.chmod(0o666)
    assert list(manhole.AuthorizedKeysFile(path).getAuthorizedKeys(b"root")) == []
    assert list(manhole.AuthorizedKeysFile(tmp_path / "absent").getAuthorizedKeys(b"root")) == []


def test_host_key_is_generated_once(tmp_path):
    first = manhole.host_key(tmp_path / manhole.HOST_KEY)
    assert first.isPublic() is False and first.sshType() == b"ssh-ed25519"
    assert manhole.host_key(tmp_path / manhole.HOST_KEY) == first


@pytest.mark.parametrize("description", [
    "tcp:2222:interface=127.0.0.1", "tcp:2222:127.0.0.9", r"tcp6:2222:interface=\:\:1",
    "unix:/run/mailsvc/manhole", "UNIX:address=/tmp/m:mode=600",
])
def test_loopback_and_unix_endpoints_are_accepted(description):
    manhole.check_endpoint(description)


@pytest.mark.parametrize("description", [
    "tcp:2222", "tcp:2222:interface=0.0.0.0", "tcp6:2222", r"tcp6:2222:interface=\:\:",
    "tcp:2222:interface=192.0.2.1", "tcp:2222:interface=localhost", "ssl:2222:interface=127.0.0.1",
    "2222",
])
def test_other_endpoints_are_refused(description):
    with pytest.raises(ValueError, match="manhole.listen"):
        manhole.check_endpoint(description)


