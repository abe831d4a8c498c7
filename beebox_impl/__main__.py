"""``python -m beebox_impl``: the ``bbx`` command line (`beebox_impl.script`)."""

import sys

from beebox_impl.script import main

if __name__ == "__main__":
    sys.exit(main())
