"""Cloud Functions gen2 looks for ``main.py`` at the root of the source archive: re-export the
register function's entry points (``on_push`` for Pub/Sub push, ``on_object_finalized`` for an
Eventarc storage trigger)."""

from functions.register.main import on_object_finalized, on_push

__all__ = ["on_object_finalized", "on_push"]
