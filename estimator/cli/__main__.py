"""`python -m estimator.cli ...` runs the `estimate` command."""

import sys

from estimator.cli.main import main

sys.exit(main())
