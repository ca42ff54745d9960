"""`python -m ci.runner_service` is `guide-guard-runner-service`."""

import sys

from ci.runner_service.cli import main

sys.exit(main())
