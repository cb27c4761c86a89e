"""The operator console's browser side as far as HTTP goes: an operator's account, sign-in and session."""

from __future__ import annotations

from http.cookies import SimpleCookie

PASSWORD = "operator horse battery"


class ConsoleSession:
    """A signed-in operator's browser, as far as HTTP goes: its console cookie and CSRF token."""

    def __init__(self, api, token: str, csrf: str):
        self.api, self.token, self.csrf = api, token, csrf

    async def json(self, method: str, path: str, csrf: bool = True, headers=None, **kwargs):
        headers = {"Cookie": f"mailsvc_operator={self.token}", **(headers or {})}
        if csrf:
            headers["X-CSRF-Token"] = self.csrf
        return await self.api.json(method, path, headers=headers, **kwargs)


def console_cookie(response) -> tuple[str, str]:
    (header,) = response.headers.getRawHeaders("set-cookie")
    cookie = SimpleCookie()
    cookie.load(header)
    return header, cookie["mailsvc_operator"].value


def error_code(body: dict) -> str:
    """The code of an error of either envelope (the operator API's copies answer the native one)."""
    return body["error"]["code"] if "error" in body else body["name"]


async def new_operator(api, email: str = "ops@example.com", name: str = "Olga") -> dict:
    code, body, _ = await api.json("POST", "/admin/v1/operators", api.operator_token,
                                   json={"email": email, "name": name})
    assert code == 201, body
    return body


async def console_signed_in(api, email: str = "ops@example.com") -> ConsoleSession:
    created = await new_operator(api, email)
    token = created["set_password_url"].rsplit("/", 1)[1]
    code, body, response = await api.json("POST", "/console/auth/password", json={"token": token, "password": PASSWORD})
    assert code == 200, body
    return ConsoleSession(api, console_cookie(response)[1], body["csrf_token"])


async def console_login(api, email: str, password: str, **kwargs):
    return await api.json("POST", "/console/auth/login", json={"email": email, "password": password}, **kwargs)
