from twisted.application.service import ServiceMaker

mailsvc = ServiceMaker(
    "mailsvc",
    "mailsvc.tap",
    "Self-hosted e-mail sending platform (HTTP API, SMTP, MTA, webhooks)",
    "mailsvc",
)
