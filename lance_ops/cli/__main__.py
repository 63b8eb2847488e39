"""``python -m lance_ops.cli``: the ``lance-ops`` command."""

from __future__ import annotations

import sys

from lance_ops.cli.commands import main

sys.exit(main())
