"""One thin module per ``obsingest`` subcommand: argparse wiring and one library call.

Modules here import only the standard library (and ``obsingest.defaults``) at import time, so
``obsingest --help`` never loads a deployment unit's dependencies.
"""
