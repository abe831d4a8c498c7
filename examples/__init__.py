"""Host programs that embed a box, to copy: `starlette_host` and `trio_host`.

A package only so that the tests (`tests/examples`) and mypy name them
``examples.<name>``; each runs on its own, as ``python examples/<name>.py``.
"""
