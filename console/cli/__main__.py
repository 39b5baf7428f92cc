"""`python -m console.cli ...` runs the CLI (as `opsconsole ...` and `python -m console` do)."""

import sys

from console.cli import main

sys.exit(main())
