"""Cloud Functions gen2 looks for ``main.py`` at the root of the source archive: re-export the
register function's entry points (``on_push`` for Pub/Sub push, ``on_object_finalized`` for an
Eventarc storage trigger, ``on_manifest`` for the ExposureManifests pushed from
``exposures``), and put the body guard and error mapping on the framework's app even if
``functions.register.main`` was imported before the framework loaded this file."""

from functions.register.main import (
    install_on_framework_app,
    on_manifest,
    on_object_finalized,
    on_push,
)

install_on_framework_app()

__all__ = ["on_manifest", "on_object_finalized", "on_push"]
