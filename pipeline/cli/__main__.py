"""``python -m turnledger.pipeline.cli``: the same command line as ``turnledger``."""

from turnledger.pipeline.cli import main

raise SystemExit(main())
