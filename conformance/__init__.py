"""beebox conformance: language-neutral vectors, and a runner for any target.

`python -m conformance [PATHS...] --target spec` runs the vector files (by default
the ones packaged in `conformance/vectors`) against a target and prints
``N passed, N failed``. `docs/conformance.md` explains the vector format and how a
host runs them.
"""
