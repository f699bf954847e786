"""Run biasscope as ``python -m biasscope``: the same as the ``biasscope`` command."""

import sys

from biasscope.cli.main import main

sys.exit(main())
