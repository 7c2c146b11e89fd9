"""``python -m functions.assembler``: run one assembler (see ``main``)."""

import sys

from functions.assembler.main import main

sys.exit(main())
