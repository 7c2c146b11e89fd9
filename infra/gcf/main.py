"""Cloud Functions gen2 loads ``main.py`` from the archive root: re-export the register
function's entry points and put the body guard and error mapping on the framework's app (even if
``functions.register.main`` was imported before the framework loaded this file)."""

from functions.register.main import install_on_framework_app, on_manifest, on_object_finalized, on_push

install_on_framework_app()

__all__ = ["on_manifest", "on_object_finalized", "on_push"]
