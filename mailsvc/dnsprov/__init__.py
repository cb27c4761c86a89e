"""DNS providers whose API the service can write a domain's records through."""
