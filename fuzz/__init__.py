"""Coverage-guided fuzzing of the box's parsers (atheris); see `docs/reliability.md`.

`fuzz.targets` holds the targets as plain functions of one input's bytes (no
atheris in them, so the CI smoke runs in `tests/reliability` call them directly);
`fuzz.seeds` builds each target's seed corpus from the tests' own inputs;
`fuzz.runner` runs one target under atheris for a bounded time. Each
``fuzz/fuzz_<target>.py`` is that runner for one target.
"""
