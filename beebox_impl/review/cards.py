"""Husk cards: YAML front matter the pass edits, a body it never touches (§4.1).

A card is ``---\\n<yaml>---\\n<body>``. The boxholder owns the body and may edit
the front matter by hand, so a write changes exactly the fields it sets and
nothing else: the bytes of every other line — key order, comments, quoting,
fields we do not know — survive as they were.

How: the front matter is read with ruamel.yaml's round-trip loader, which says
on which line each top-level key starts. A field we set replaces only its own
lines (the key's line and the indented lines under it), with that one field
dumped by ruamel (so quoting and block style are right, and the dump is read
back to prove it says the value). A field the card lacks is appended at the end
of the front matter. The card written is read back before it is kept: when the
line edit does not read back as the card with those fields set (a front matter
that is a flow ``{…}`` mapping, which nobody writes by hand), the front matter
is dumped whole, and a card that cannot be written readably is not written.

`ensure_chat_husk` creates a session's card the moment the session has an id,
with exclusive create (losing a race to another writer of the same session is
success); `origin` is stamped then and never again, except that
`reconcile_husk_origins` stamps cards that predate the field and whose
transcript is on this machine.
"""

from __future__ import annotations

import fcntl
import io
import logging
import os
import re
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any, Final

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.error import YAMLError
from ruamel.yaml.reader import Reader
from ruamel.yaml.scalarstring import DoubleQuotedScalarString, LiteralScalarString

from beebox_impl.atomic import write_atomic
from beebox_impl.review.origin import MachineOrigin
from beebox_impl.review.paths import HUSK_SUFFIX, LOCK_DIR, husk_dir
from beebox_spec.errors import BeeboxError
from beebox_spec.review.husk import read_husk_field

__all__ = [
    "FIELD_CONTAINS",
    "FIELD_CONTEXT_DIR",
    "FIELD_ENGINE",
    "FIELD_EVIDENCE",
    "FIELD_ORIGIN",
    "FIELD_ORIGIN_NAME",
    "FIELD_REVIEW_SPAN",
    "FIELD_SESSION",
    "FIELD_TITLE",
    "Card",
    "CardFormatError",
    "CardStamp",
    "FieldValue",
    "HuskCard",
    "StampedCard",
    "card_stamp",
    "card_write_lock",
    "create_card_exclusive",
    "ensure_chat_husk",
    "find_husk_for_session",
    "husk_file_name",
    "husk_of_card",
    "iter_husk_paths",
    "list_chat_husks",
    "parse_card",
    "read_card",
    "read_husk",
    "read_stamped_card",
    "reconcile_husk_origins",
    "render_card",
    "update_card",
]

_log = logging.getLogger(__name__)

# §4.1 field names.
FIELD_SESSION: Final = "session"
FIELD_CONTEXT_DIR: Final = "context-dir"
FIELD_ENGINE: Final = "engine"
FIELD_ORIGIN: Final = "origin"
FIELD_ORIGIN_NAME: Final = "origin-name"
FIELD_TITLE: Final = "title"
FIELD_CONTAINS: Final = "contains"
FIELD_EVIDENCE: Final = "contains-evidence"
FIELD_REVIEW_SPAN: Final = "review-span"

_FENCE: Final = "---"
# A key ruamel writes as it is, with nothing to quote.
_PLAIN_KEY_RE: Final = re.compile(r"[a-z][a-z0-9-]*")


class CardFormatError(BeeboxError):
    """A card without a front matter block, or whose front matter is not a YAML mapping."""


class _SpanForwardingReader(Reader):
    """ruamel's reader, moving over a span without a line break in one step.

    `Reader.forward` walks its span a character at a time, in Python, to keep the
    line and column; the scanner moves over a whole scalar that way (a card's
    account is kilobytes of literal block), and that walk was most of a card's
    parse. A span with no character that moves the line or the column unusually
    (line feed, carriage return, byte-order mark) moves the column by its length,
    which is what the walk would do; any other span is walked as before.
    """

    def forward(self, length: int = 1) -> None:
        if length > 1:
            if self.pointer + length + 1 >= len(self.buffer):
                self.update(length + 1)
            stop = self.pointer + length
            span = self.buffer[self.pointer : stop]
            if "\n" not in span and "\r" not in span and "\ufeff" not in span:
                self.pointer = stop
                self.index += length
                self.column += length
                return
        super().forward(length)


def _yaml() -> YAML:
    # One instance per use: ruamel's YAML objects are not safe to share across threads.
    yaml = YAML(typ="rt")
    yaml.Reader = _SpanForwardingReader
    yaml.preserve_quotes = True
    # Never fold a long line: a folded title would read back with spaces moved.
    yaml.width = 1 << 30
    return yaml


@dataclass(frozen=True)
class Card:
    """A card split into its parts: `head` (the front matter's YAML text) and `body`.

    `opening` and `closing` are the fence lines as written (with their line
    ends); `fields` is the round-trip parse of `head`.
    """

    opening: str
    head: str
    closing: str
    body: str
    fields: CommentedMap

    def text(self, name: str) -> str | None:
        """A field as review reads it: a non-empty string, else None (§4.6)."""
        value = self.fields.get(name)
        return read_husk_field(str(value)) if isinstance(value, str) else None

    def render(self) -> str:
        """The card's text, as parsed."""
        return self.opening + self.head + self.closing + self.body


def parse_card(text: str) -> Card:
    """Split and parse a card; `CardFormatError` when it has no front matter mapping."""
    lines = text.splitlines(keepends=True)
    # A card starts with its opening fence.
    if not lines or lines[0].rstrip("\r\n") != _FENCE:
        raise CardFormatError("no front matter: the card does not start with ---")
    for index in range(1, len(lines)):
        if lines[index].rstrip("\r\n") == _FENCE:
            head = "".join(lines[1:index])
            closing = lines[index]
            body = "".join(lines[index + 1 :])
            return Card(lines[0], head, closing, body, _load_mapping(head))
    raise CardFormatError("no front matter: the closing --- is missing")


def _load_mapping(head: str) -> CommentedMap:
    try:
        loaded = _yaml().load(head)
    except YAMLError as error:
        raise CardFormatError(f"front matter is not YAML: {error}") from None
    except Exception as error:
        # ruamel's round-trip loader fails in its own ways on some input: it refuses
        # comments it cannot place (NotImplementedError) and trips its own
        # assertions on others. A card it cannot load is one review must not rewrite.
        raise CardFormatError(
            f"front matter this reader cannot round-trip: {type(error).__name__} {error}"
        ) from None
    # An empty front matter is an empty mapping.
    if loaded is None:
        return CommentedMap()
    if not isinstance(loaded, CommentedMap):
        raise CardFormatError("front matter is not a mapping")
    return loaded


def read_card(path: Path) -> Card:
    """The card at `path` (`OSError` when unreadable, `CardFormatError` when malformed)."""
    return parse_card(path.read_text(encoding="utf-8"))


FieldValue = str | bool


def render_card(fields: Mapping[str, FieldValue], body: str = "") -> str:
    """A new card's text: the fields in the order given, then the body."""
    head = "".join(_dump_field(name, value) for name, value in fields.items())
    return f"{_FENCE}\n{head}{_FENCE}\n{body}"


def _dump_field(name: str, value: FieldValue, *, check: bool = True) -> str:
    """``name: value`` as YAML, in the first style that reads back as `value`.

    With ``check`` false the dump is not read back here (the caller reads back
    the whole card it goes into): the first style that does not end the document.
    """
    yaml = _yaml()
    if not check and isinstance(value, str):
        literal = _literal_block(name, value)
        if literal is not None:
            return literal
    styles: list[Any]
    if isinstance(value, bool):
        styles = [value]
    elif "\n" in value:
        styles = [LiteralScalarString(value), DoubleQuotedScalarString(value)]
    else:
        styles = [value, DoubleQuotedScalarString(value)]
    for styled in styles:
        out = io.StringIO()
        yaml.dump({name: styled}, out)
        dumped = out.getvalue()
        # A document-end marker would close the front matter early; try the next style.
        if "\n...\n" in "\n" + dumped:
            continue
        if not check:
            return dumped
        try:
            reloaded = yaml.load(dumped)
        except YAMLError:
            # A control character a block scalar cannot carry: the quoted style escapes it.
            continue
        if isinstance(reloaded, Mapping) and reloaded.get(name) == value and len(reloaded) == 1:
            return dumped
    raise CardFormatError(f"cannot write {name!r} as YAML")


def _literal_block(name: str, value: str) -> str | None:
    """``name: |…`` with `value` as a literal block, written directly; None when
    `value` is not plainly one (ruamel's emitter is then asked).

    The account (`contains-evidence`) is long, and ruamel's emitter walks it a
    character at a time in Python; a literal block is only the lines, indented.
    Only what is certainly a literal block is written this way: a plain key,
    several lines of printable text (tabs allowed), no line starting with a
    space or tab (no indentation indicator needed); the chomping indicator says
    how many line breaks end it. The card it goes into is read back whole.
    """
    if not _PLAIN_KEY_RE.fullmatch(name) or "\n" not in value.rstrip("\n"):
        return None
    body = value.rstrip("\n")
    lines = body.split("\n")
    if any(line[:1] in (" ", "\t") or not line.replace("\t", " ").isprintable() for line in lines):
        return None
    breaks = len(value) - len(body)
    chomping = "-" if breaks == 0 else ("" if breaks == 1 else "+")
    indented = "".join(f"  {line}\n" if line else "\n" for line in lines)
    return f"{name}: |{chomping}\n{indented}" + "\n" * max(0, breaks - 1)


def _with_fields(card: Card, updates: Mapping[str, FieldValue]) -> str:
    """The card's text with `updates` set, every other byte kept where that reads back.

    Each way of writing is checked by reading the whole card back: the fields must
    be the card's fields with `updates` set, in the same order, and the body the
    same. The first that is wins: the line edit (a block mapping, the fields' own
    lines replaced), then the front matter dumped whole as it is styled, then
    dumped whole in block style (comments and quoting kept as ruamel keeps them),
    then the fields alone in block style.
    A card none of them can write is refused (`CardFormatError`), never written
    unreadable.
    """
    expected = [*card.fields.items()]
    positions = {name: index for index, (name, _) in enumerate(expected)}
    for name, value in updates.items():
        if name in positions:
            expected[positions[name]] = (name, value)
        else:
            expected.append((name, value))
    for head in _heads_with_fields(card, updates):
        text = card.opening + head + card.closing + card.body
        try:
            written = parse_card(text)
        except CardFormatError:
            continue
        if [*written.fields.items()] == expected and written.body == card.body:
            return text
    raise CardFormatError(f"cannot write {sorted(updates)} into this card's front matter readably")


def _heads_with_fields(card: Card, updates: Mapping[str, FieldValue]) -> Iterator[str]:
    # The candidate front matters, least changed first (see `_with_fields`).
    positions = [card.fields.lc.key(key) for key in card.fields]
    # Only a block mapping has lines of its own per key (a flow `{…}` has none).
    if card.head.strip() and all(column == 0 for _, column in positions):
        # Each field in ruamel's first choice of style (the card as a whole is read
        # back anyway), then, if that did not read back, each field read back alone
        # and written in the first style that says its value.
        for check_each in (False, True):
            try:
                yield _edited_lines(card, updates, check_each=check_each)
            except CardFormatError:
                continue  # a value no style writes alone: the whole dumps may
    for style in ("as styled", "block", "block without comments"):
        fields = _load_mapping(card.head)
        for name, value in updates.items():
            fields[name] = value
        if style == "block without comments":
            # What ruamel keeps between tokens (blank lines after a flow key, say)
            # can make its dump unreadable: the fields alone.
            fields = CommentedMap(fields.items())
        if style != "as styled":
            fields.fa.set_block_style()
        out = io.StringIO()
        _yaml().dump(fields, out)
        yield out.getvalue()


def _edited_lines(card: Card, updates: Mapping[str, FieldValue], *, check_each: bool) -> str:
    # The front matter with each updated field's own lines replaced by its dump, and
    # new fields appended: every other line as it was.
    lines = card.head.splitlines(keepends=True)
    starts = sorted(card.fields.lc.key(key)[0] for key in card.fields)
    replacements: list[tuple[int, int, str]] = []
    appended: list[str] = []
    for name, value in updates.items():
        dumped = _dump_field(name, value, check=check_each)
        if name in card.fields:
            start = card.fields.lc.key(name)[0]
            later = [line for line in starts if line > start]
            stop = later[0] if later else len(lines)
            replacements.append((start, _value_end(lines, start, stop), dumped))
        else:
            appended.append(dumped)
    for start, end, dumped in sorted(replacements, reverse=True):
        lines[start:end] = [dumped]
    head = "".join(lines)
    # A field appended after a last line without its newline would join that line.
    if appended and head and not head.endswith("\n"):
        head += "\n"
    return head + "".join(appended)


def _value_end(lines: list[str], start: int, stop: int) -> int:
    """One past the last line of the field starting at `start` (the next key is at `stop`).

    A field is every line up to the next key's, less the blank lines and column-0
    comments at its end, which belong to whatever follows. (Not only the indented
    lines: a quoted scalar may go on at column 0.)
    """
    end = stop
    while end > start + 1 and (not lines[end - 1].strip() or lines[end - 1].startswith("#")):
        end -= 1
    return end


@contextmanager
def card_write_lock(box_root: Path) -> Iterator[None]:
    """Serialise this box's card writers across processes (re-read, decide, write)."""
    path = box_root / LOCK_DIR / "husk-cards.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)


CardStamp = tuple[int, int, int, int]


@dataclass(frozen=True)
class StampedCard:
    """A card as read, and the stamp (device, inode, size, mtime) its file had before."""

    card: Card
    stamp: CardStamp


def card_stamp(path: Path) -> CardStamp:
    """Which file `path` is, as it is now: a card with the same stamp has the same text."""
    status = os.stat(path)
    return status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns


def read_stamped_card(path: Path) -> StampedCard:
    """The card at `path` with the stamp taken before it was read (so a change
    while reading shows as a different stamp later, never as the same)."""
    stamp = card_stamp(path)
    return StampedCard(read_card(path), stamp)


def update_card(
    box_root: Path,
    path: Path,
    decide: Callable[[Card], Mapping[str, FieldValue]],
    *,
    known: StampedCard | None = None,
) -> tuple[Card, bool]:
    """Re-read the card, let `decide` choose fields from it as it is now, write them once.

    Runs under `card_write_lock`, so a decision is made on the card it changes.
    `known`, a card the caller read before, is used instead of reading it again
    when the file still has its stamp (each card write is a new file, renamed in).
    Answers the card as read and whether anything was written (nothing is when
    every chosen field already holds its value).
    """
    with card_write_lock(box_root):
        if known is not None and card_stamp(path) == known.stamp:
            card = known.card
        else:
            card = read_card(path)
        updates = {
            name: value for name, value in decide(card).items() if card.fields.get(name) != value
        }
        if not updates:
            return card, False
        write_atomic(path, _with_fields(card, updates).encode("utf-8"))
        return card, True


# ---------------------------------------------------------------------------
# Husks
# ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HuskCard:
    """What discovery needs of a husk: where it is, its session, its origin, its engine."""

    path: Path
    session: str
    origin: str | None
    engine: str | None
    context_dir: str | None


def husk_file_name(created: date, session_id: str, attempt: int = 1) -> str:
    """``<YYYY-MM-DD>_<session8>.chat.card``; a later attempt adds ``-<n>`` (a prefix clash)."""
    suffix = "" if attempt == 1 else f"-{attempt}"
    return f"{created.isoformat()}_{session_id[:8]}{suffix}{HUSK_SUFFIX}"


def iter_husk_paths(box_root: Path) -> list[Path]:
    """Every ``*.chat.card`` directly in the husk folder, by name (none when it is missing)."""
    folder = husk_dir(box_root)
    try:
        names = sorted(
            entry.name
            for entry in os.scandir(folder)
            if entry.name.endswith(HUSK_SUFFIX) and entry.is_file()
        )
    except FileNotFoundError:
        return []
    return [folder / name for name in names]


def read_husk(path: Path) -> HuskCard:
    """A husk's discovery fields; `CardFormatError` when it has no `session`."""
    return husk_of_card(path, read_card(path))


def husk_of_card(path: Path, card: Card) -> HuskCard:
    """The discovery fields of the husk at `path`, read as `card`."""
    session = card.text(FIELD_SESSION)
    # §4.1: a card without a session is not a husk.
    if session is None:
        raise CardFormatError("the card has no session field")
    return HuskCard(
        path=path,
        session=session,
        origin=card.text(FIELD_ORIGIN),
        engine=card.text(FIELD_ENGINE),
        context_dir=card.text(FIELD_CONTEXT_DIR),
    )


def list_chat_husks(box_root: Path) -> list[HuskCard]:
    """Every readable husk, by file name; unreadable or session-less cards are warned, skipped."""
    husks: list[HuskCard] = []
    for path in iter_husk_paths(box_root):
        try:
            husks.append(read_husk(path))
        except (OSError, UnicodeDecodeError, CardFormatError) as error:
            _log.warning("skipping husk %s: %s", path, error)
    return husks


def find_husk_for_session(box_root: Path, session_id: str) -> Path | None:
    """The husk whose `session` field is `session_id`, or None.

    The file name's session prefix is only a fast path (§4.1): a card whose text
    does not contain the id cannot be its husk, so only those that do are parsed.
    """
    paths = iter_husk_paths(box_root)
    suffix = f"_{session_id[:8]}"
    likely = [path for path in paths if suffix in path.name]
    for path in [*likely, *(path for path in paths if path not in likely)]:
        try:
            if session_id not in path.read_text(encoding="utf-8"):
                continue
            if read_husk(path).session == session_id:
                return path
        except (OSError, UnicodeDecodeError, CardFormatError):
            continue
    return None


def create_card_exclusive(path: Path, text: str) -> bool:
    """Create `path` holding `text` whole, only if nothing is there; False when something is.

    The bytes go to a temporary file first and are linked into place, so the
    card appears complete or not at all, and two creators cannot both win.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(text.encode("utf-8"))
            file.flush()
            os.fsync(file.fileno())
        os.chmod(temporary, 0o644)
        try:
            os.link(temporary, path)
        except FileExistsError:
            return False
        return True
    finally:
        os.unlink(temporary)


def ensure_chat_husk(
    box_root: Path,
    session_id: str,
    *,
    origin: MachineOrigin,
    created: date,
    title: str | None,
    engine: str | None = None,
    context_dir: str | None = None,
) -> Path:
    """The session's husk, created now if it has none (§4.1 `ensureChatHusk`).

    Idempotent on the `session` field. `title` is the first-message snippet
    (`beebox_impl.review.walk.first_message_title`), None when there is no
    transcript yet. `origin` is stamped here, at creation, and never restamped.
    """
    existing = find_husk_for_session(box_root, session_id)
    if existing is not None:
        return existing
    fields: dict[str, str] = {FIELD_SESSION: session_id}
    if context_dir:
        fields[FIELD_CONTEXT_DIR] = context_dir
    if engine:
        fields[FIELD_ENGINE] = engine
    fields[FIELD_ORIGIN] = origin.id
    fields[FIELD_ORIGIN_NAME] = origin.name
    if title:
        fields[FIELD_TITLE] = title
    text = render_card(fields)
    attempt = 1
    while True:
        path = husk_dir(box_root) / husk_file_name(created, session_id, attempt)
        if create_card_exclusive(path, text):
            return path
        # Someone else created this name: for this session, that is our husk.
        try:
            if read_husk(path).session == session_id:
                return path
        except (OSError, UnicodeDecodeError, CardFormatError):
            pass
        attempt += 1


def reconcile_husk_origins(
    box_root: Path, origin: MachineOrigin, transcript_for: Callable[[HuskCard], Path | None]
) -> int:
    """Stamp `origin` on husks that predate the field and whose transcript is here (§4.1).

    `transcript_for` says where a husk's transcript would be on this machine
    (None when it cannot be named). Answers how many husks were stamped; the
    fallback decays as they are.
    """
    stamped = 0
    for husk in list_chat_husks(box_root):
        if husk.origin is not None:
            continue
        transcript = transcript_for(husk)
        if transcript is None or not transcript.is_file():
            continue

        def stamp(card: Card) -> dict[str, str]:
            # Re-checked on the card as it is now: an origin is never restamped.
            if card.text(FIELD_ORIGIN) is not None:
                return {}
            return {FIELD_ORIGIN: origin.id, FIELD_ORIGIN_NAME: origin.name}

        _, wrote = update_card(box_root, husk.path, stamp)
        stamped += wrote
    return stamped
