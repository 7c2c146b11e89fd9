"""The composition root: the ``obsingest`` command, the one package that may import every
deployment unit, the kernel and ``infra.local``. ``commands``: one thin module per subcommand;
``script`` and ``demo``: the wiring they call."""
