"""The chat's husk card: made once the session has an id and a first message.

Spec sources: `docs/sources.md#review-qualifies` and `docs/sources.md#facts-4-1`
(§4.1: `ensureChatHusk` is called when a session gets its id; the husk's title
is the first-message snippet; `origin` is stamped at creation; on boot, old husks
whose transcript is here get this machine's origin). The card rules are
`beebox_impl.review.cards`; this is when the box applies them.

The husk is made after the first turn that ends with the session's id known,
not on the id itself: the SDK announces the id when the run starts, before the
first message is in the transcript, and the snippet is read from there.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import anyio.to_thread

from beebox_impl.review.cards import HuskCard, ensure_chat_husk, reconcile_husk_origins
from beebox_impl.review.origin import MachineOrigin
from beebox_impl.review.walk import first_message_title
from beebox_impl.session.chat import ChatSession
from beebox_impl.session.chat_events import ChatEvent, Done, EventSubscription, follow_events
from beebox_impl.transcript.location import InvalidSessionId

__all__ = ["TranscriptPathFor", "keep_husks", "stamp_old_husks"]

_log = logging.getLogger(__name__)

# Where a session's transcript is on this machine (raises `InvalidSessionId`).
TranscriptPathFor = Callable[[str], Path]


def _make_husk(
    box_root: Path, session_id: str, origin: MachineOrigin, now: datetime, path: Path
) -> Path:
    return ensure_chat_husk(
        box_root,
        session_id,
        origin=origin,
        created=now.date(),
        title=first_message_title(path, session_id),
    )


async def keep_husks(
    session: ChatSession,
    events: EventSubscription[ChatEvent],
    *,
    box_root: Path,
    origin: MachineOrigin,
    transcript_path_for: TranscriptPathFor,
    now: Callable[[], datetime],
) -> None:
    """Make the husk of each session id the chat has, after its first finished turn.

    ``events`` is a subscription taken before this task started. A failure to
    write a card is logged, never raised: the chat goes on, and the next turn
    tries again.
    """
    husked: set[str] = set()

    async def husk_after_turn(event: ChatEvent) -> None:
        session_id = session.session_id
        if not isinstance(event, Done) or session_id is None or session_id in husked:
            return
        moment = now()

        def make_husk() -> None:
            # Finding the transcript looks at the files: off the loop, with the write.
            _make_husk(box_root, session_id, origin, moment, transcript_path_for(session_id))

        try:
            await anyio.to_thread.run_sync(make_husk)
        except InvalidSessionId:
            _log.warning("no husk for session %r: not a transcript id", session_id)
        except OSError as error:
            _log.warning("could not make the husk of %s: %s", session_id, error)
            return
        husked.add(session_id)

    await follow_events(session.subscribe, events, husk_after_turn)


def stamp_old_husks(
    box_root: Path, origin: MachineOrigin, transcript_path_for: TranscriptPathFor
) -> int:
    """On boot: stamp ``origin`` on husks without one whose transcript is here."""

    def transcript_for(husk: HuskCard) -> Path | None:
        try:
            return transcript_path_for(husk.session)
        except InvalidSessionId:
            return None

    return reconcile_husk_origins(box_root, origin, transcript_for)
