"""HTTP/1.1 responses parsed out of the bytes a server wrote (a StringTransport's value)."""


class Responses:
    """Splits bytes written by the server into (status, headers, body) responses."""

    def __init__(self):
        self.responses: list[tuple[int, dict, bytes]] = []

    def feed(self, data: bytes) -> None:
        while data:
            head, _, data = data.partition(b"\r\n\r\n")
            lines = head.split(b"\r\n")
            status = int(lines[0].split(b" ")[1])
            if status == 100:
                continue
            headers = {}
            for line in lines[1:]:
                name, _, value = line.partition(b":")
                headers[name.decode().lower()] = value.strip().decode()
            if headers.get("transfer-encoding") == "chunked":
                body = b""
                while True:
                    size, _, data = data.partition(b"\r\n")
                    size = int(size, 16)
                    body, data = body + data[:size], data[size + 2:]
                    if size == 0:
                        break
            else:
                length = int(headers.get("content-length", 0))
                body, data = data[:length], data[length:]
            self.responses.append((status, headers, body))
