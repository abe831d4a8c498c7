"""beebox_impl — the production implementation of beebox.

Structured concurrency on anyio (asyncio or trio), files, SQLite, the stdlib HTTP
adapter and the `bbx` command line. It takes its tables, grammar and pure rules
from `beebox_spec` and is proven equal to it by the test suites.
"""
