"""`python -m obsingest` is the same as the `obsingest` command."""

import sys

from obsingest.cli.main import main

sys.exit(main())
