"""Permission requests: a tool call waiting for a person's answer, and what ends it.

This module is ours (ours, `docs/spec-decisions.md#permission-requests`): the
original box refused a tool call that needed approval
(`docs/design.md#design-5-permissions` (§5)). Claude Code asks its host instead,
through the SDK's ``can_use_tool`` callback — the tool's name, its input, and a
context: the prompt sentence (``title``), a display name, a description, the path
that made it ask (``blocked_path``), why it asked (``decision_reason``) and the
rules it suggests (``suggestions``: "always allow this") — and waits for an answer.
This module is the rule for such a request while it waits: both chat sessions
(`beebox_spec.chat_session`, `beebox_spec.thread_pool`) keep their pending
requests with these functions.

Theory of operation
-------------------

A request belongs to the run that asked it. It is *pending* from the ask until
exactly one thing ends it, and every end is reported (`PermissionEnd`: how, and
the decision the run was given, if any):

1. **Asked** (`ask`). A run the session holds open asks: the request is pending,
   and announced (``permission-request``). A run the session is closing (its
   close asked for: a stop, a restart, a park) is answered at once, denied with
   `STOPPED_MESSAGE`, and nothing is announced: nobody could answer in time.
2. **Answered** (`answer`). Only a pending request can be answered: ``allow``
   (and with ``always``, the rule the run suggested is kept, so the same call is
   not asked again; a request that suggested none is simply allowed) or ``deny``
   (with a message the model reads, `DENIED_MESSAGE` when none is given). An id
   that is not pending is refused with `PermissionNotPending`; the box tells an id
   it never saw from one already ended by its record.
3. **Timed out** (`time_out`). A request still pending `DEFAULT_TIMEOUT` (a box
   setting, stated in `permission_timeout`) after its ask is denied with
   `TIMED_OUT_MESSAGE`. The clock is the implementation's; here the expiry is an
   event. A request already ended is not timed out twice.
4. **Stopped** (`deny_run`). Stop, reset and restart (the whole-box chat) and a
   park or stop (a thread session) deny every pending request of the run with
   `STOPPED_MESSAGE`, before the run is closed, so the run ends its turn on an
   answer rather than on a missing one.
5. **Withdrawn** (`withdraw`). The run takes its ask back (the CLI does when its
   turn is interrupted): the request ends unanswered.
6. **The run ended** (`drop_run`). A run's close ends its pending requests
   unanswered: there is nothing left to answer.
7. **The lifecycle.** A request changes no phase. A turn waiting for an answer is
   a turn in flight: the session reads busy, sends are queued, and a stop works
   while it waits (rule 4).

What a request shows (`PermissionRequest`) is the SDK's context as given, the
wire's camelCase, with `canAlwaysAllow` true when the run suggested a rule that
allows (an ``addRules`` suggestion whose behaviour is ``allow``): only then can a
person choose "always".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar, Final, Literal, NotRequired, TypeAlias, TypedDict, TypeVar

from beebox_spec.entries import JsonObject, JsonValue
from beebox_spec.errors import InvariantError, Rejection
from beebox_spec.permission_timeout import DEFAULT_TIMEOUT

__all__ = [
    "DEFAULT_TIMEOUT",
    "DENIED_MESSAGE",
    "MAX_DENY_MESSAGE_CHARS",
    "STOPPED_MESSAGE",
    "TIMED_OUT_MESSAGE",
    "AnswerAsk",
    "AnswerPermission",
    "Decision",
    "EndedHow",
    "InvalidPermissionAnswer",
    "PendingPermission",
    "PermissionAsked",
    "PermissionEnd",
    "PermissionEventName",
    "PermissionNotPending",
    "PermissionReply",
    "PermissionRequest",
    "PermissionStep",
    "PermissionTimedOut",
    "PermissionWithdrawn",
    "SettlingEvent",
    "answer",
    "ask",
    "can_always_allow",
    "deny_run",
    "drop_run",
    "in_order",
    "parse_permission_answer",
    "settle",
    "time_out",
    "withdraw",
]

# What the model reads when a request is denied without a message of the person's.
DENIED_MESSAGE: Final = "The person using the box denied this tool call."
# What the model reads when nobody answered in time.
TIMED_OUT_MESSAGE: Final = "Nobody answered this permission request in time, so it was denied."
# What the model reads when the chat was stopped, reset or restarted while it waited.
STOPPED_MESSAGE: Final = (
    "The chat was stopped while this permission request waited, so it was denied."
)
# The longest message a person may give with a denial (characters).
MAX_DENY_MESSAGE_CHARS: Final = 2000

Decision: TypeAlias = Literal["allow", "deny"]
# What a session tells its listeners of a request.
PermissionEventName: TypeAlias = Literal["permission-request", "permission-ended"]
EndedHow: TypeAlias = Literal["answered", "timed-out", "stopped", "withdrawn", "run-ended"]


class PermissionRequest(TypedDict):
    """What a pending request shows a person (and the event announcing it carries)."""

    id: str
    toolName: str
    input: JsonObject
    toolUseId: str
    canAlwaysAllow: bool
    title: NotRequired[str]
    displayName: NotRequired[str]
    description: NotRequired[str]
    blockedPath: NotRequired[str]
    decisionReason: NotRequired[str]


@dataclass(frozen=True)
class PermissionReply:
    """An answer to a request: the decision, a message for the model on a denial,
    and whether to keep the rule the run suggested (``always``, on an allow)."""

    decision: Decision
    message: str = ""
    always: bool = False


@dataclass(frozen=True)
class PermissionEnd:
    """How a request ended, and the decision its run was given (None: no answer)."""

    id: str
    how: EndedHow
    decision: Decision | None


@dataclass(frozen=True)
class PendingPermission:
    """A pending request: its id and the run that asked it."""

    id: str
    run: int


class PermissionNotPending(Rejection):
    """An answer to a request that is not pending (never asked, or ended)."""

    status_hint: ClassVar[int] = 409


class InvalidPermissionAnswer(Rejection):
    """An answer that is not one (`parse_permission_answer`)."""


# --- Events and effects (shared by both session models) ---------------------------


@dataclass(frozen=True)
class PermissionAsked:
    """Engine event: run ``run`` asks ``request``."""

    run: int
    request: PermissionRequest


@dataclass(frozen=True)
class PermissionWithdrawn:
    """Engine event: run ``run`` took its ask ``request_id`` back."""

    run: int
    request_id: str


@dataclass(frozen=True)
class AnswerPermission:
    """Caller event: answer the request ``request_id`` with ``reply``."""

    request_id: str
    reply: PermissionReply


@dataclass(frozen=True)
class PermissionTimedOut:
    """Clock event: the request ``request_id`` has waited its timeout."""

    request_id: str


@dataclass(frozen=True)
class AnswerAsk:
    """Effect: give run ``run`` the ``reply`` to its ask ``request_id``."""

    run: int
    request_id: str
    reply: PermissionReply


@dataclass(frozen=True)
class PermissionStep:
    """The pending requests after a rule, and what the session must do and say:
    the answers to give (`AnswerAsk`), the request to announce, the ends to report,
    in order."""

    pending: tuple[PendingPermission, ...]
    answers: tuple[AnswerAsk, ...] = ()
    announce: PermissionRequest | None = None
    ended: tuple[PermissionEnd, ...] = ()


EmitT = TypeVar("EmitT")


def in_order(
    changed: PermissionStep, emit: Callable[[PermissionEventName, object], EmitT]
) -> tuple[AnswerAsk | EmitT, ...]:
    """A step's effects in the order a session carries them out: the answers to the
    runs, then what listeners hear (the ends, then a new request), each told with the
    session's own ``emit``."""
    told: list[EmitT] = [emit("permission-ended", end) for end in changed.ended]
    if changed.announce is not None:
        told.append(emit("permission-request", changed.announce))
    return (*changed.answers, *told)


# --- The rules -----------------------------------------------------------------------


def ask(
    pending: tuple[PendingPermission, ...],
    run: int,
    request: PermissionRequest,
    *,
    run_closing: bool,
) -> PermissionStep:
    """Rule 1: run ``run`` asks ``request``."""
    # An id names one request for good.
    if any(held.id == request["id"] for held in pending):
        raise InvariantError(f"permission request {request['id']} asked twice")
    # A run the session is closing is answered at once: nobody could answer in time.
    if run_closing:
        return PermissionStep(
            pending,
            answers=(AnswerAsk(run, request["id"], PermissionReply("deny", STOPPED_MESSAGE)),),
        )
    return PermissionStep((*pending, PendingPermission(request["id"], run)), announce=request)


def answer(
    pending: tuple[PendingPermission, ...], request_id: str, reply: PermissionReply
) -> PermissionStep:
    """Rule 2: answer the pending request ``request_id``."""
    held = _find(pending, request_id)
    # Only a pending request can be answered.
    if held is None:
        raise PermissionNotPending(f"no pending permission request {request_id!r}")
    given = (
        reply
        if reply.decision == "allow" or reply.message
        else PermissionReply("deny", DENIED_MESSAGE)
    )
    return PermissionStep(
        _without(pending, request_id),
        answers=(AnswerAsk(held.run, request_id, given),),
        ended=(PermissionEnd(request_id, "answered", reply.decision),),
    )


def time_out(pending: tuple[PendingPermission, ...], request_id: str) -> PermissionStep:
    """Rule 3: the request ``request_id`` has waited its timeout."""
    held = _find(pending, request_id)
    # Ended already (answered, stopped, withdrawn): nothing to time out.
    if held is None:
        return PermissionStep(pending)
    return PermissionStep(
        _without(pending, request_id),
        answers=(AnswerAsk(held.run, request_id, PermissionReply("deny", TIMED_OUT_MESSAGE)),),
        ended=(PermissionEnd(request_id, "timed-out", "deny"),),
    )


def deny_run(pending: tuple[PendingPermission, ...], run: int) -> PermissionStep:
    """Rule 4: the session stops run ``run``: its pending requests are denied."""
    stopped = tuple(held for held in pending if held.run == run)
    return PermissionStep(
        tuple(held for held in pending if held.run != run),
        answers=tuple(
            AnswerAsk(run, held.id, PermissionReply("deny", STOPPED_MESSAGE)) for held in stopped
        ),
        ended=tuple(PermissionEnd(held.id, "stopped", "deny") for held in stopped),
    )


def withdraw(pending: tuple[PendingPermission, ...], run: int, request_id: str) -> PermissionStep:
    """Rule 5: run ``run`` took its ask back."""
    held = _find(pending, request_id)
    # Ended already (an answer and a withdrawal crossed): nothing more to end.
    if held is None or held.run != run:
        return PermissionStep(pending)
    return PermissionStep(
        _without(pending, request_id), ended=(PermissionEnd(request_id, "withdrawn", None),)
    )


def drop_run(pending: tuple[PendingPermission, ...], run: int) -> PermissionStep:
    """Rule 6: run ``run`` ended: its pending requests end unanswered."""
    return PermissionStep(
        tuple(held for held in pending if held.run != run),
        ended=tuple(
            PermissionEnd(held.id, "run-ended", None) for held in pending if held.run == run
        ),
    )


# The events whose rule needs nothing of the session: an answer, a timeout, a withdrawal.
SettlingEvent: TypeAlias = AnswerPermission | PermissionTimedOut | PermissionWithdrawn


def settle(pending: tuple[PendingPermission, ...], event: SettlingEvent) -> PermissionStep:
    """Rules 2, 3 and 5, by the event (both sessions apply them as they are)."""
    match event:
        case AnswerPermission(request_id=request_id, reply=reply):
            return answer(pending, request_id, reply)
        case PermissionTimedOut(request_id=request_id):
            return time_out(pending, request_id)
        case PermissionWithdrawn(run=run, request_id=request_id):
            return withdraw(pending, run, request_id)


def _find(pending: tuple[PendingPermission, ...], request_id: str) -> PendingPermission | None:
    return next((held for held in pending if held.id == request_id), None)


def _without(
    pending: tuple[PendingPermission, ...], request_id: str
) -> tuple[PendingPermission, ...]:
    return tuple(held for held in pending if held.id != request_id)


# --- Reading what a run and a person say ------------------------------------------------


def can_always_allow(suggestions: JsonValue) -> bool:
    """Whether the run suggested a rule that allows (an ``addRules`` ``allow``)."""
    # Suggestions are a list of the SDK's permission updates, as dicts.
    if not isinstance(suggestions, list):
        return False
    return any(
        isinstance(update, dict)
        and update.get("type") == "addRules"
        and update.get("behavior") == "allow"
        for update in suggestions
    )


def parse_permission_answer(body: JsonValue) -> PermissionReply:
    """An answer as a person sends it: ``{"decision": "allow" | "deny", "message"?:
    str, "always"?: bool}``, nothing else. Raises `InvalidPermissionAnswer`."""
    # An answer is a JSON object.
    if not isinstance(body, dict):
        raise InvalidPermissionAnswer("a permission answer is a JSON object")
    unknown = sorted(set(body) - {"decision", "message", "always"})
    # Only the three fields: a typo must not be an answer that means something else.
    if unknown:
        raise InvalidPermissionAnswer(f"unknown field(s) in a permission answer: {unknown}")
    decision = body.get("decision")
    # The decision is one of the two.
    if decision not in ("allow", "deny"):
        raise InvalidPermissionAnswer('"decision" must be "allow" or "deny"')
    message = body.get("message", "")
    # A message is text, of a bounded length.
    if not isinstance(message, str) or len(message) > MAX_DENY_MESSAGE_CHARS:
        raise InvalidPermissionAnswer(
            f'"message" must be a string of at most {MAX_DENY_MESSAGE_CHARS} characters'
        )
    always = body.get("always", False)
    # "always" is a boolean, and only an allow keeps a rule.
    if not isinstance(always, bool) or (always and decision != "allow"):
        raise InvalidPermissionAnswer('"always" must be a boolean, and true only with "allow"')
    return PermissionReply("allow" if decision == "allow" else "deny", message, always)
