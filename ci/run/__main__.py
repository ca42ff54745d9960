"""`python -m ci.run` runs guides (the `guide-guard` command)."""

import sys

from ci.run import main

sys.exit(main())
