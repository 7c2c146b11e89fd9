"""The composition root: the ``obsingest`` command.

The one package allowed to import every deployment unit (``producers``, ``functions``,
``beam_jobs``), the kernel (``obsingest``) and the local stack (``infra.local``). ``commands``
holds one thin module per subcommand; ``script`` and ``demo`` hold the wiring they call.
"""
