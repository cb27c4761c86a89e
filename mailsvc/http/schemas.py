"""
The named JSON Schemas of requests and replies that several resources' operations share, and
those of the dashboard's own pages (sign-in, users, the inbox, the web UI's files).
"""

from __future__ import annotations

from mailsvc.http.operation import (
    BOOL,
    INT,
    NULLABLE_STR,
    NUMBER,
    OBJECT,
    STR,
    UUID,
    obj,
    ref,
)

CONTACT = obj(email=STR, first_name=NULLABLE_STR, last_name=NULLABLE_STR, unsubscribed=BOOL,
              properties=OBJECT, segments={"type": "array", "items": obj(id=STR)})
TENANT_FIELDS: dict[str, dict] = dict(
    name=STR, status=STR, status_reason=NULLABLE_STR, daily_quota=INT, monthly_quota=INT,
    send_rate_per_sec=INT, api_rate_per_sec=INT, delivery_mode=STR,
    max_domains={"type": ["integer", "null"]},
    plan={"enum": ["free", "starter", "growth", "scale"]})
USAGE = ref("Usage")
TENANT = obj(("object", "id", "name", "plan", "status"), object={"const": "tenant"}, id=UUID, **TENANT_FIELDS)
ROLE = {"enum": ["owner", "member"]}
USER_FIELDS = dict(object={"const": "user"}, id=UUID, email=STR, role=ROLE, status={"enum": ["active", "invited"]},
                   two_factor=BOOL, created_at=STR)
USER_REQUIRED = ("object", "id", "email", "role", "status", "created_at")
USER = obj(USER_REQUIRED, **USER_FIELDS)
#: A sign-in's reply: the user and the CSRF token of the session its cookie carries.
SIGNED_IN = obj((*USER_REQUIRED, "csrf_token"), **USER_FIELDS, csrf_token=STR)
OPERATOR_FIELDS = dict(object={"const": "operator"}, id=UUID, email=STR, name=STR,
                       status={"enum": ["active", "invited"]}, two_factor=BOOL, created_at=STR)
OPERATOR_REQUIRED = ("object", "id", "email", "name", "status", "created_at")
OPERATOR_LINK = obj((*OPERATOR_REQUIRED, "set_password_url"), **OPERATOR_FIELDS, set_password_url=STR)
OPERATOR_SIGNED_IN = obj((*OPERATOR_REQUIRED, "csrf_token"), **OPERATOR_FIELDS, csrf_token=STR)
#: A right password of someone with two-factor sign-in: no cookie yet; the challenge, with a code, signs in.
CHALLENGE = obj(("object", "challenge", "email", "methods"), object={"const": "two_factor_challenge"},
                challenge=STR, email=STR, methods={"type": "array", "items": {"enum": ["totp", "recovery_code"]}})
SIGNED_IN_OR_CHALLENGE = {"oneOf": [SIGNED_IN, CHALLENGE]}
OPERATOR_SIGNED_IN_OR_CHALLENGE = {"oneOf": [OPERATOR_SIGNED_IN, CHALLENGE]}
#: A user with a set-password link (an invitation, a reset).
USER_LINK = obj((*USER_REQUIRED, "set_password_url"), **USER_FIELDS, set_password_url=STR)
USER_BODY = obj(("email",), email=STR, role=ROLE)
PASSWORD = {"type": "string", "minLength": 10, "maxLength": 1024}  # domain/users.py
DASHBOARD_USAGE = obj(("day", "daily_quota", "month", "monthly_quota"), day=INT, daily_quota=INT, month=INT,
                      monthly_quota=INT)
ACCOUNT = obj(("object", "id", "name", "plan", "status"), object={"const": "account"}, id=UUID, name=STR,
              plan={"enum": ["free", "starter", "growth", "scale"]}, status=STR, sandbox=BOOL, daily_quota=INT,
              monthly_quota=INT, max_domains={"type": ["integer", "null"]}, send_rate_per_sec=INT,
              api_rate_per_sec=INT)
#: A static file of the web UI, and what else its type may be.
UI_TYPES = ("text/javascript", "text/css", "image/svg+xml", "image/png")
#: A SpamAssassin score (mail/spam.py ``SpamScore.as_dict``): ``POST /emails/check``'s reply.
SPAM_SCORE = obj(("object", "score", "threshold", "is_spam", "rules"), object={"const": "spam_score"},
                 score=NUMBER, threshold=NUMBER, is_spam=BOOL,
                 rules={"type": "array", "items": obj(("name", "score", "description"), name=STR, score=NUMBER,
                                                      description=STR)})
#: A preview's ``spam`` (with spam.spamd set): the score, or why spamd gave none (the preview still answers).
PREVIEW_SPAM = {"anyOf": [SPAM_SCORE, obj(("object", "error"), object={"const": "spam_score"}, error=STR)]}
NULLABLE_RATE = {"type": ["number", "null"], "minimum": 0, "maximum": 1}
#: ``GET /domains/{id}/dmarc`` (app/domains.py ``dmarc``): per UTC day, newest first, each source's share aligned.
DMARC = obj(
    ("object", "domain_id", "domain", "days", "data"), object={"const": "dmarc_summary"}, domain_id=UUID,
    domain=STR, days=INT,
    data={"type": "array", "items": obj(
        ("date", "messages", "dkim_pass_rate", "spf_pass_rate", "sources"), date=STR, messages=INT,
        dkim_pass_rate=NULLABLE_RATE, spf_pass_rate=NULLABLE_RATE,
        sources={"type": "array", "items": obj(
            ("source_ip", "messages", "dkim_pass_rate", "spf_pass_rate", "reporters"), source_ip=STR, messages=INT,
            dkim_pass_rate=NULLABLE_RATE, spf_pass_rate=NULLABLE_RATE,
            reporters={"type": "array", "items": STR})})})
INBOX_ITEM = obj(("object", "id", "email_id", "from", "to", "subject", "outcome", "simulated", "created_at"),
                 object={"const": "inbox_message"}, id=UUID, email_id=UUID, to={"type": "array", "items": STR},
                 outcome={"enum": ["delivered", "bounced", "complained", "captured"]}, simulated=BOOL)
CHECK = obj(("result", "detail"), result=STR, domain=STR, detail=STR)
INBOX_MESSAGE = obj(
    (*INBOX_ITEM["required"], "return_path", "html", "text", "raw", "headers", "attachments", "checks"),
    **INBOX_ITEM["properties"], return_path=STR, html=NULLABLE_STR, text=NULLABLE_STR, html_url=STR, raw=STR,
    headers={"type": "array", "items": {"type": "array", "items": STR}},
    attachments={"type": "array", "items": obj(("content_type", "size"), content_type=STR, size=INT)},
    checks=obj(("simulated", "dkim", "spf", "dmarc", "list_unsubscribe", "spam"), simulated=BOOL,
               dkim={"type": "array", "items": CHECK}, spf=CHECK, dmarc=CHECK,
               list_unsubscribe=obj(("one_click",), list_unsubscribe=NULLABLE_STR,
                                    list_unsubscribe_post=NULLABLE_STR, one_click=BOOL),
               spam={"type": ["object", "null"]}))
