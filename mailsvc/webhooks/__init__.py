"""Webhooks: managing them, signing requests, and the dispatcher that delivers events."""
