"""`new_uuid4`: the canonical form of a random version-4 UUID, fresh each time."""

from __future__ import annotations

import uuid

from beebox_impl.ids import new_uuid4


def test_new_uuid4_is_a_canonical_random_uuid() -> None:
    made = [new_uuid4() for _ in range(2000)]
    assert len(set(made)) == len(made)
    for text in made:
        parsed = uuid.UUID(text)
        assert str(parsed) == text  # lower-case hex, hyphens at 8-4-4-4-12
        assert parsed.version == 4
        assert parsed.variant == uuid.RFC_4122
    # The random digits vary: across 2000 uuids, no hex position but the version's is constant.
    fixed = {14}  # the version digit
    for position in range(36):
        if text[position] == "-" or position in fixed:
            continue
        assert len({one[position] for one in made}) > 1, position
