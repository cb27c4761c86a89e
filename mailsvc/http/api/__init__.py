"""The API resources, one class per resource family, each serving the main and native surfaces."""
