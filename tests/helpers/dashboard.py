"""A dashboard user signed in through the in-process application (cookie and CSRF token)."""

from __future__ import annotations

from http.cookies import SimpleCookie

PASSWORD = "correct horse battery"


class Session:
    """A signed-in browser, as far as HTTP goes: its cookie and CSRF token."""

    def __init__(self, api, token: str, csrf: str, user: dict):
        self.api, self.token, self.csrf, self.user = api, token, csrf, user

    async def json(self, method: str, path: str, csrf: bool = True, headers=None, **kwargs):
        headers = {"Cookie": f"mailsvc_session={self.token}", **(headers or {})}
        if csrf:
            headers["X-CSRF-Token"] = self.csrf
        return await self.api.json(method, path, headers=headers, **kwargs)


def cookie_of(response) -> tuple[str, str]:
    """The Set-Cookie header and the session token it sets."""
    (header,) = response.headers.getRawHeaders("set-cookie")
    cookie = SimpleCookie()
    cookie.load(header)
    return header, cookie["mailsvc_session"].value


async def first_user(api, email: str = "owner@example.com", **tenant_fields) -> tuple[dict, str, dict]:
    """A tenant (its full-access key) and its first user, created by the operator: (tenant, key, user)."""
    tenant, key = await api.tenant(**tenant_fields)
    code, user, _ = await api.json("POST", f"/admin/v1/tenants/{tenant['id']}/users", api.operator_token,
                                   json={"email": email})
    assert code == 201, user
    return tenant, key, user


def link_token(user: dict) -> str:
    return user["set_password_url"].rsplit("/", 1)[1]


async def signed_in(api, email: str = "owner@example.com", **tenant_fields) -> tuple[dict, str, Session]:
    tenant, key, user = await first_user(api, email, **tenant_fields)
    code, body, response = await api.json("POST", "/auth/password",
                                          json={"token": link_token(user), "password": PASSWORD})
    assert code == 200, body
    _, token = cookie_of(response)
    return tenant, key, Session(api, token, body["csrf_token"], body)
