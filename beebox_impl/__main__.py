"""``python -m beebox_impl``: the ``bbx`` command line (`beebox_impl.cli.main`)."""

import sys

from beebox_impl.cli import main

if __name__ == "__main__":
    sys.exit(main())
