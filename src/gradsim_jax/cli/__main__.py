"""`python -m gradsim_jax.cli` runs `gradsim-jax`."""

import sys

from gradsim_jax.cli.app import main

sys.exit(main())
