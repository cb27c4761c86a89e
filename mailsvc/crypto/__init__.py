"""Key vault, derived credentials, signed links and TLS material."""
