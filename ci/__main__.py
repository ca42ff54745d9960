"""`python -m ci` is `python -m ci.run`."""

import sys

from ci.run import main

sys.exit(main())
