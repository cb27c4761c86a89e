"""``python -m mailsvc.cli``: the ``mailsvc`` command without its installed script."""

import sys

from mailsvc.cli import main

sys.exit(main())
