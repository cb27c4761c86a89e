"""Use cases, one module per resource: what the HTTP and SMTP edges and the engines call."""
