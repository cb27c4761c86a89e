"""mailsvc: a self-hosted e-mail sending platform."""

__version__ = "0.1.0"
