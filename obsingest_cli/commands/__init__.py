"""One thin module per ``obsingest`` subcommand: argparse wiring and one library call. Only the
standard library (and ``obsingest.defaults``) at import, so ``obsingest --help`` stays light."""
