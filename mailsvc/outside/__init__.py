"""The one gate to outside addresses: resolve, refuse private ranges, pin, bound."""
