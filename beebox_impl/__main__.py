"""``python -m beebox_impl``: the ``bbx`` command line (`beebox_impl.cli.program`)."""

from beebox_impl.cli import program

if __name__ == "__main__":
    program()
