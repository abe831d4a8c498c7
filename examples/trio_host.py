"""A trio program that embeds a box: send with retry, wait for the turn, read it back.

Run it offline (the default echo engine answers; no network, no API key)::

    python examples/trio_host.py [BOX_FOLDER]

With no folder it works in a temporary one. It imports only `beebox_impl`'s public
names; `tests/examples/test_examples.py` runs it and checks what it prints.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import trio

from beebox_impl import (
    Attachment,
    BeeboxError,
    Box,
    BoxEvent,
    Deduplicated,
    EventSubscription,
    MalformedMediaRef,
    MediaFound,
    MediaMissing,
    PhotosWaiting,
    Queued,
    SendFailed,
    SendOutcome,
    SendRequest,
    TailSlice,
    TurnStarted,
)

# Any bytes do: the box checks a photo's media type, not its pixels. Over 768 bytes,
# so the history hands it back by reference (a smaller one stays inline).
PHOTO = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8


def describe(outcome: SendOutcome) -> str:
    match outcome:
        case TurnStarted():
            return "turn started"
        case Queued():
            return "queued behind the turn in flight"
        case Deduplicated():
            return "already recorded, not sent twice"
        case PhotosWaiting():
            return "not recorded: photos already wait for the next turn"
        case SendFailed(error=error):
            # Recorded all the same: the box delivers it when it next opens.
            return f"recorded, but its turn did not start: {error}"


async def wait_for(events: EventSubscription[BoxEvent], name: str) -> BoxEvent:
    """The next event called ``name``."""
    async for event in events:
        if event.name == name:
            return event
    raise RuntimeError("the box closed")


async def send_with_retry(
    box: Box, request: SendRequest, events: EventSubscription[BoxEvent], attempts: int = 3
) -> SendOutcome:
    """Send; while photos wait for the next turn, send again once a turn has ended.

    A retry carries the same message id, so the box records the message once however
    often it is sent (a lost answer, a crashed client: send again, same id).
    """
    outcome = await box.send(request)
    for _ in range(attempts - 1):
        if not isinstance(outcome, PhotosWaiting):
            break
        await wait_for(events, "done")
        outcome = await box.send(request)
    print(f"send {request.message_id}: {describe(outcome)}")
    return outcome


async def reply_to(box: Box, request: SendRequest) -> str | None:
    """Send ``request``; the agent's words once the turn it started has ended, or None
    when it started none (a message queued is answered in a later turn, with others)."""
    with box.subscribe() as events:
        if isinstance(await send_with_retry(box, request, events), TurnStarted):
            async for event in events:
                if event.name == "turn-text":  # narrows `event.data` to {"text": str}
                    return event.data["text"]
                if event.name == "start-failed":
                    return f"(nothing: {event.data['reason']})"
    return None


async def main(folder: Path) -> None:
    async with Box.open(folder / "box", projects_root=folder / "projects") as box:
        hello = SendRequest("hello", message_id="m-1")
        photo = SendRequest("a photo", message_id="m-2", images=(Attachment("image/png", PHOTO),))
        # `hello` twice, as a client whose answer was lost sends it again: recorded once.
        for request in (hello, hello, photo):
            reply = await reply_to(box, request)
            if reply is not None:
                print("the agent said:", reply)

        session_id = box.session_id
        assert session_id is not None  # a turn has run
        history = await box.history(session_id, TailSlice(10))
        print(f"history: {history['total']} entries")
        refs: list[str] = []
        for entry in history["entries"]:
            for block in entry["content"]:
                if "text" in block:
                    print(f"  {entry['type']}: {block['text']}")
                if "imageRef" in block:
                    print(f"  {entry['type']}: a photo, {block.get('mediaType')}")
                    refs.append(block["imageRef"])

        for ref in (*refs, f"{session_id}/no-such-entry/0"):
            match await box.media(ref):
                case MediaFound(media_type=media_type, data=data):
                    print(f"photo by ref: {media_type}, {len(data)} bytes, same: {data == PHOTO}")
                case MediaMissing(reason=reason):
                    print(f"photo by ref: missing ({reason})")
        try:
            await box.media("../../etc/passwd")
        except MalformedMediaRef as error:
            print(f"a malformed ref: refused ({error.status_hint})")


if __name__ == "__main__":
    try:
        if len(sys.argv) > 1:
            trio.run(main, Path(sys.argv[1]))
        else:
            with tempfile.TemporaryDirectory() as temporary:
                trio.run(main, Path(temporary))
    except BeeboxError as error:  # the box would not open: in use, unreadable settings, …
        sys.exit(f"trio_host: {error}")
