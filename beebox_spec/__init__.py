"""beebox_spec — the executable specification of beebox.

Pure, synchronous, standard library only: no I/O, no clock reads, no threads, no
async. Each module states its rule in prose, cites the spec source it encodes, and
reads top to bottom. The production implementation (`beebox_impl`) is proven equal
to these functions by property-based and stateful tests; the conformance vectors
(`conformance/vectors`) pin them in a language-neutral form.

Run ``python -m beebox_spec`` to print the chat phase table and its legal
transitions, generated from the one table in `beebox_spec.lifecycle`.
"""
