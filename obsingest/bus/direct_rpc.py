"""Pub/Sub RPCs as plain gRPC calls on a generated client's channel, with the raw protobufs.

Why: for one small message, the generated method's wrappers, logging interceptor and proto-plus
types cost more CPU than the RPC itself. A gRPC error becomes the API's exception, and one the
generated method would retry is made again through it (``fallback``), so its retry policy holds.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

#: the RPCs called directly: method -> (gRPC path, request type, response type; '': Empty)
_METHODS = {
    "pull": ("/google.pubsub.v1.Subscriber/Pull", "PullRequest", "PullResponse"),
    "acknowledge": ("/google.pubsub.v1.Subscriber/Acknowledge", "AcknowledgeRequest", ""),
    "publish": ("/google.pubsub.v1.Publisher/Publish", "PublishRequest", "PublishResponse"),
}


@cache
def message_types(method: str) -> tuple[Any, Any]:
    """The raw protobuf request and response classes of ``method`` (imported on first use, as
    the clients are)."""
    from google.protobuf import empty_pb2
    from google.pubsub_v1 import types

    _, request, response = _METHODS[method]
    answer = getattr(types, response).pb() if response else empty_pb2.Empty
    return getattr(types, request).pb(), answer


class DirectRpcs:
    """``method``s as gRPC callables on ``channel`` (a generated client's
    ``transport.grpc_channel``), each made on first use."""

    def __init__(self, channel: Any) -> None:
        self._channel = channel
        self._rpcs: dict[str, Any] = {}

    def call(
        self,
        method: str,
        request: dict[str, Any],
        timeout: float | None,
        fallback: Callable[[], Any],
        retried: tuple[type[Exception], ...] = (),
    ) -> Any:
        """The answer of ``method`` with ``request`` (the protobuf's fields); on an error the
        generated method retries (``google_transient()`` and ``retried``), ``fallback()``'s."""
        import grpc
        from google.api_core import exceptions as api_exceptions

        rpc = self._rpcs.get(method)
        if rpc is None:
            request_type, response_type = message_types(method)
            rpc = self._rpcs[method] = self._channel.unary_unary(
                _METHODS[method][0],
                request_serializer=request_type.SerializeToString,
                response_deserializer=response_type.FromString,
            )
        try:
            return rpc(message_types(method)[0](**request), timeout=timeout)
        except grpc.RpcError as exc:
            from obsingest.retry import google_transient  # tenacity: only on this path

            error = api_exceptions.from_grpc_error(exc)  # type: ignore[no-untyped-call]  # api_core
            if not isinstance(error, (*google_transient(), *retried)):
                raise error from exc
        return fallback()
