"""beebox_spec — the executable specification of beebox.

Pure, synchronous, standard library only: no I/O, no clock reads, no threads, no
async. Each module states its rule in prose, cites the spec source it encodes, and
reads top to bottom. The production implementation (`beebox_impl`) is proven equal
to these functions by property-based and stateful tests; the conformance vectors
(`conformance/vectors`) pin them in a language-neutral form.

Run ``python -m beebox_spec`` to print the chat phase table and its legal
transitions, generated from the one table in `beebox_spec.phases`.

Reading order
-------------

Read the modules in this order. Each imports only modules above it, so nothing is
used before it is stated (`tests/spec/test_reading_order.py` checks the imports
against this list):

1. `errors` — `Rejection` (outside input refused) vs `InvariantError` (a caller bug)
2. `entries` — the wire shapes of history: `SessionEntry`, content blocks, `SessionHistory`
3. `js_values` — how the original's JavaScript reads values: whitespace, `String()`, JSON
4. `phases` — the five phases and the ONE table of legal transitions; busy/running
5. `lifecycle` — a phase and the run it owns; `next_lifecycle`, the one write path
6. `sdk_messages` — the SDK message union and the one shared `adapt_sdk_message`
7. `run_protocol` — what a session and the engine running its run say to each other
8. `permission_timeout` — how long a permission request may wait before it is denied
9. `permissions` — a tool call waiting for a person's answer, and what ends it
10. `chat_session` — `ChatSession` as a pure state machine: queue/drain, stop vs restart
11. `thread_pool` — `ChatThreadSession` (no queue, no `stopping`) and the pool's decisions
12. `media` — the photo strip, references, `transform_content`, line lookup, `extract_media`
13. `attribution` — a message's sender named in its opening tag, and read back
14. `reconcile` — the acceptance record read back as pending messages, the client's join
15. `transcript` — the guarded line reader, oversize stubs, history entries and slices
16. `review` — chat review: the pass, and the conventions its modules share
17. `review.snippets` — the first user message reduced to a title
18. `review.turns` — which transcript lines are turns the person took
19. `review.leak_scan` — the credential shapes, the scan and the redaction
20. `review.rendering` — what the reviewer reads of a span, and the elision
21. `review.reviewer` — the reviewer's prompts and the schema of its output
22. `review.husk` — title ownership and the one write to the husk card
23. `review.journal` — the span journal: hashes, `resolve_span`, state file, decisions
24. `review.qualification` — the discovery gates and the order sessions are reviewed in
25. `phase_doc` — the phase table as text and Markdown (`docs/phases.md`)
26. `__main__` — ``python -m beebox_spec``
"""
