"""``python -m obsingest_cli`` is the same as the ``obsingest`` command."""

import sys

from obsingest_cli.main import main

sys.exit(main())
