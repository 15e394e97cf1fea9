"""A request body size limit for the HTTP transports, against a client that floods.

It refuses with 413 a declared `Content-Length` over the limit before reading
anything, and a body sent without one (chunked) as soon as it grows past the limit.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["BodyLimit"]


class BodyLimit:
    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.limit):
            await self._refuse(send)
            return
        received = 0
        refused = False

        async def limited_receive() -> Message:
            nonlocal received, refused
            message = await receive()
            if message["type"] == "http.request" and not refused:
                received += len(message.get("body", b""))
                if received > self.limit:
                    refused = True
                    await self._refuse(send)
                    # The app sees the body end here; what it answers is dropped.
                    return {"type": "http.request", "body": b"", "more_body": False}
            return message

        async def send_unless_refused(message: Message) -> None:
            if not refused:
                await send(message)

        await self.app(scope, limited_receive, send_unless_refused)

    async def _refuse(self, send: Send) -> None:
        body = f"request body too large: at most {self.limit:,} bytes are accepted\n".encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"text/plain; charset=utf-8"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
