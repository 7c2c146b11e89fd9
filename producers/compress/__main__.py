"""``python -m producers.compress ...``: the fpack-compatible command without the obsingest CLI
around it (the same function ``obsingest compress`` calls), to measure the library path alone."""

import sys

from producers.compress.fpack_cli import main

sys.exit(main(sys.argv[1:]))
