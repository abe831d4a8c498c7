// The chat page: one box's whole-box chat, its history and its live turn.
//
// Theory of operation (docs/web.md):
//
// - The transcript is the durable record; `GET /api/chat/bootstrap` gives its tail,
//   and "Load earlier" pages back through `GET /api/chat/history`.
// - A send shows at once as an optimistic copy (a *pending* entry) and is posted with
//   a client `messageId`; a failed post is retried with the same id, so the box
//   records it once however many tries it takes (it answers a repeat
//   `{deduplicated: true}`). Until the box has answered, the copy is also in the
//   *outbox*, which is what is retried.
// - The box's own record of accepted sends (bootstrap's `pending`) is folded into
//   the pending list by `mergeAcceptedIntoPending`, and `reconcilePending` retires
//   each pending entry once the transcript holds its echo: both from reconcile.js,
//   the one copy of the rule, proven equal to the Python spec by the conformance
//   vectors. The pending list and the outbox survive a reload (sessionStorage).
// - `/api/events` says when to look again: a turn started, a turn's text, a turn
//   done. The stream reconnects with backoff, and every (re)connection re-reads
//   the state, since events sent while it was down are gone.
// - A tool call the agent needs approval for is a *permission request*: a card with
//   Allow, Deny and, where offered, Always allow. Cards come from bootstrap's
//   `permissions` (so a reload shows them again) and `permission-request` events;
//   `permission-ended`, the box's answer to ours, or a 409 (it ended elsewhere) takes
//   a card away. An id seen ending is never shown again, though a bootstrap read
//   begun before the end may still list it.
// - The view follows the newest message while it is at the bottom, whatever grows
//   (a photo loading after its history); the person scrolling up stops that.
// - After a stop the status says so, and a copy the stop took out of the queue reads
//   as not sent. A 401 (no cookie) ends everything but one notice: how to log in.
// - A sub-agent's work (entries marked `sidechain`) is folded under the Task or Agent
//   call that started it (subagents.js says which); a call that names its sub-agent
//   (`agentId`, Claude Code 2.x) has its work read from `GET /api/chat/history?agent=`
//   when the fold is opened, and again while the call is still running. A live
//   message of a sub-agent (it names its call) is never the box's reply: its call's
//   open fold reads the sub-agent's work again instead.

import * as api from "./api.js";
import {
  entryText,
  mergeAcceptedIntoPending,
  normalizeForCompare,
  reconcilePending,
} from "./reconcile.js";
import { markdownNode } from "./markdown.js";
import { groupSidechains, startsSubAgent, subAgentCall } from "./subagents.js";
import {
  liveNode,
  messageNode,
  permissionNode,
  sessionNode,
  setPermissionState,
  stateLabel,
  subAgentNode,
} from "./view.js";

// How many entries a history read asks for at a time.
const PAGE_SIZE = 40;
// How many of a sub-agent's entries one read of its history asks for.
const SUB_AGENT_PAGE_SIZE = 100;
// Where the pending list and the outbox wait out a reload (this tab only).
const STORAGE_KEY = "beebox.pending.v1";
// Retry delays for a send that did not reach the box: doubling, at most 30 s apart.
const FIRST_SEND_RETRY_MS = 1000;
const LONGEST_SEND_RETRY_MS = 30000;
// Within this many pixels of the bottom, the view follows new messages and photos.
const STICK_TO_BOTTOM_PX = 80;
// The photo types the box keeps (beebox_spec.media.SERVABLE_MEDIA_TYPES).
const PHOTO_TYPES = new Set(["image/png", "image/jpeg", "image/gif", "image/webp"]);
// How many ended permission ids the page remembers (to keep them from coming back).
const ENDED_PERMISSIONS_KEPT = 200;
// How much of a new message the live region reads out.
const ANNOUNCED_CHARS = 300;
// How many ended permission requests the page reads to tell a refused tool call.
const DECISIONS_READ = 1000;
// The width at which the session list folds away behind its button (style.css).
const NARROW = window.matchMedia("(max-width: 48rem)");

const $ = (id) => document.getElementById(id);
const ui = {
  log: $("log"),
  messages: $("messages"),
  permissions: $("permissions"),
  empty: $("empty"),
  loadEarlier: $("load-earlier"),
  status: $("status"),
  notice: $("notice"),
  stop: $("stop"),
  restart: $("restart"),
  composer: $("composer"),
  text: $("composer-text"),
  send: $("send"),
  fileInput: $("file-input"),
  attachments: $("attachments"),
  sessions: $("sessions"),
  sessionList: $("session-list"),
  toggleSessions: $("toggle-sessions"),
  login: $("login"),
  loginToken: $("login-token"),
  chat: $("chat"),
  closeSessions: $("close-sessions"),
  announcer: $("announcer"),
  alert: $("alert"),
};

const state = {
  // The whole-box chat's session (where sends go), and the session shown: null
  // while showing the chat itself, else one opened from the session list.
  chatSessionId: null,
  viewing: null,
  shownSessionId: null,
  // The transcript's entries shown, oldest first, and the index of the first.
  entries: [],
  firstIndex: 0,
  // Entries owed: the page's optimistic copies and the box's accepted sends.
  pending: [],
  // Sends the box has not answered yet, by messageId: {entry, state, images, tries, timer}.
  outbox: new Map(),
  // Each pending copy's delivery state, by uuid ("sent", "queued", …).
  delivery: new Map(),
  // Send answers so far, and for each copy answered "queued" the count its answer
  // made: a status read that began before an answer is older than it.
  answers: 0,
  queuedAnswer: new Map(),
  // A stop seen (this page's, or a `close` {code: 0} from elsewhere): the send answers
  // counted before it (a copy queued by then was dropped with the queue), and whether
  // the chat has stayed stopped since (no turn begun).
  stopMark: null,
  stopped: false,
  stopAsked: false,
  status: null,
  online: false,
  // The box answered 401: this browser has no cookie (or a stale one) for it.
  loggedOut: false,
  // The turn as it streams in: finished assistant messages by uuid, and the text of
  // the one streaming now (`turn-delta`), until the transcript holds them.
  live: new Map(),
  streaming: "",
  // Entries the live region has read out (or that were there when the page opened).
  announced: new Set(),
  // Tool calls a person refused, by tool use id (from the box's permission record),
  // and whether that record has been read since a failed call was shown.
  refusedTools: new Set(),
  decisionsRead: false,
  attachments: [],
  sessions: [],
  // Pending permission requests, oldest first, by id: {request, node, busy, error, focused}.
  permissions: new Map(),
  // Sub-agents started in this page's sight, by the tool use id of their call (a
  // `task` event names both): a running call has no result yet to name its agent.
  startedAgents: new Map(),
  // Ids of requests seen ending, oldest first (at most ENDED_PERMISSIONS_KEPT).
  endedPermissions: new Set(),
};

// --- Persistence across a reload ------------------------------------------------

function savePending() {
  const saved = {
    pending: state.pending.map((entry) => ({ entry, delivery: state.delivery.get(entry.uuid) })),
    outbox: [...state.outbox.values()].map(({ entry, images }) => ({ entry, images })),
  };
  try {
    sessionStorage.setItem(STORAGE_KEY, JSON.stringify(saved));
  } catch {
    // Too big to keep (photos): keep the texts, the retry of a photo cannot survive.
    saved.outbox = saved.outbox.map(({ entry }) => ({ entry, images: [] }));
    try {
      sessionStorage.setItem(STORAGE_KEY, JSON.stringify(saved));
    } catch {
      // Storage refused altogether: the box's own record still shows what it accepted.
    }
  }
}

function restorePending() {
  let saved = null;
  try {
    saved = JSON.parse(sessionStorage.getItem(STORAGE_KEY) ?? "null");
  } catch {
    saved = null;
  }
  if (saved === null) return;
  for (const { entry, delivery } of saved.pending ?? []) {
    state.pending.push(entry);
    if (delivery) state.delivery.set(entry.uuid, delivery);
  }
  for (const { entry, images } of saved.outbox ?? []) {
    state.outbox.set(entry.messageId, { entry, images, state: "failed", tries: 0, timer: null });
  }
}

// --- History --------------------------------------------------------------------

/** Fold a freshly read tail of the transcript into what is shown. */
function mergeTail(entries, total) {
  const firstFetched = total - entries.length;
  const known = new Map(state.entries.map((entry, index) => [entry.uuid, index]));
  const shownEnd = state.firstIndex + state.entries.length;
  // The tail does not reach what is shown (many entries came meanwhile): start over.
  if (state.entries.length === 0 || firstFetched > shownEnd) {
    state.entries = [...entries];
    state.firstIndex = firstFetched;
    return;
  }
  for (const entry of entries) {
    const at = known.get(entry.uuid);
    // An entry read again replaces its older copy (a turn's entry can grow).
    if (at !== undefined) state.entries[at] = entry;
    else state.entries.push(entry);
  }
}

let loadingEarlier = false;

/** One history read for the page before the first entry shown; only its entries are
 * built and inserted (the ones shown stay as they are). The button keeps the focus
 * while it reads; when nothing earlier is left it goes, and the focus moves to the
 * conversation. */
async function loadEarlier() {
  if (loadingEarlier || state.firstIndex === 0 || state.shownSessionId === null) return;
  const limit = Math.min(PAGE_SIZE, state.firstIndex);
  const offset = state.firstIndex - limit;
  loadingEarlier = true;
  setUnavailable(ui.loadEarlier, true);
  ui.loadEarlier.setAttribute("aria-busy", "true");
  try {
    const page = await api.historyPage(state.shownSessionId, offset, limit);
    const known = new Set(state.entries.map((entry) => entry.uuid));
    const earlier = page.entries.filter((entry) => !known.has(entry.uuid));
    for (const entry of earlier) state.announced.add(entry.uuid);
    state.entries = [...earlier, ...state.entries];
    state.firstIndex = offset;
    const hadFocus = document.activeElement === ui.loadEarlier;
    render({ keepPosition: true });
    announce(`${earlier.length} earlier ${earlier.length === 1 ? "message" : "messages"} loaded`);
    if (hadFocus && state.firstIndex === 0) ui.log.focus({ preventScroll: true });
  } catch (error) {
    showNotice(`Could not load earlier messages: ${error.message}`);
  } finally {
    loadingEarlier = false;
    setUnavailable(ui.loadEarlier, false);
    ui.loadEarlier.removeAttribute("aria-busy");
  }
}

// --- Reading the box's state ------------------------------------------------------

let refreshing = null;
let refreshAgain = false;

/** Re-read bootstrap; calls that come while one runs are folded into one more read. */
function refresh() {
  if (refreshing !== null) {
    refreshAgain = true;
    return refreshing;
  }
  refreshing = (async () => {
    try {
      do {
        refreshAgain = false;
        await refreshOnce();
      } while (refreshAgain);
    } catch {
      // Not reachable: the event stream's reconnection reads again. A 401 has made
      // the page logged out already (`api.onUnauthorized`).
    } finally {
      refreshing = null;
    }
  })();
  return refreshing;
}

async function refreshOnce() {
  const answersBefore = state.answers;
  const permissionsBefore = new Set(state.permissions.keys());
  const boot = await api.bootstrap({ session: state.viewing, tail: PAGE_SIZE });
  const queuedThen = boot.status.queued;
  state.status = boot.status;
  // A send answered "queued" while this read was on its way is still queued.
  const queuedSince = [...state.queuedAnswer.values()].some((answer) => answer > answersBefore);
  if (queuedSince) state.status.queued = Math.max(state.status.queued, 1);
  if (state.viewing === null) state.chatSessionId = boot.sessionId;
  const firstRead = state.shownSessionId === null && state.entries.length === 0;
  if (boot.sessionId !== state.shownSessionId) {
    state.shownSessionId = boot.sessionId;
    state.entries = [];
    state.firstIndex = 0;
  }
  const knownBefore = new Set(state.entries.map((entry) => entry.uuid));
  if (boot.history) mergeTail(boot.history.entries, boot.history.total);
  announceNewEntries(knownBefore, firstRead);
  if (state.viewing === null) {
    state.pending = mergeAcceptedIntoPending(state.pending, boot.pending ?? []);
    // Nothing queued any more: a copy that was queued before this read began is now
    // the turn being answered (one answered since is newer than what the read saw),
    // unless a stop came after it: the stop cleared the queue it was in.
    if (!queuedThen) {
      for (const [uuid, delivery] of state.delivery) {
        const answer = state.queuedAnswer.get(uuid) ?? 0;
        if (delivery === "queued" && answer <= answersBefore) {
          const dropped = state.stopMark !== null && answer <= state.stopMark;
          setDelivery(uuid, dropped ? "dropped" : "sent");
          state.queuedAnswer.delete(uuid);
        }
      }
    }
    forgetDropped(boot.pending ?? []);
  }
  mergePermissions(boot.permissions ?? [], permissionsBefore);
  const shown = new Set(state.entries.map((entry) => entry.uuid));
  for (const uuid of state.live.keys()) if (shown.has(uuid)) state.live.delete(uuid);
  if (!boot.status.busy || state.viewing !== null) {
    state.live.clear();
    state.streaming = "";
  } else if (typeof boot.liveText === "string") {
    adoptLiveText(boot.liveText);
  }
  render({ toBottom: firstRead });
  refreshRunningSubAgents();
  readRefusals();
}

/** The texts of the turn in flight already shown whole: the assistant entries after
 * the last user entry, and the finished messages not yet in the transcript. */
function shownTurnTexts() {
  const texts = [];
  for (let index = state.entries.length - 1; index >= 0; index -= 1) {
    const entry = state.entries[index];
    // A sub-agent's turn is not the reply.
    if (entry.sidechain === true) continue;
    if (entry.type === "user") break;
    texts.unshift(entryText(entry));
  }
  return [...texts, ...state.live.values()];
}

/**
 * Bootstrap's `liveText`, the text streamed so far, as the text still streaming: what
 * the page shows whole already (a finished message of the turn) is taken off its
 * start. The newer of it and what the stream brought meanwhile wins: a read that set
 * out before the last deltas holds less than the page has, never more.
 */
function adoptLiveText(liveText) {
  let rest = liveText;
  for (const shown of shownTurnTexts()) {
    if (shown !== "" && rest.startsWith(shown)) rest = rest.slice(shown.length).replace(/^\s+/, "");
  }
  if (!state.streaming.startsWith(rest)) state.streaming = rest;
}

/** Read out the assistant messages a refresh brought that nobody has heard yet; the
 * ones there when the page opens are not news. */
function announceNewEntries(knownBefore, firstRead) {
  for (const entry of state.entries) {
    if (knownBefore.has(entry.uuid) || state.announced.has(entry.uuid)) continue;
    state.announced.add(entry.uuid);
    if (!firstRead && entry.type === "assistant" && entry.sidechain !== true) announceMessage(entryText(entry));
  }
}

/** A failed tool call may have been refused by a person: the box's permission record
 * says which (read once each time a failed call is shown that it has not placed). */
async function readRefusals() {
  if (state.decisionsRead) return;
  const failed = state.entries.some((entry) =>
    (entry.content ?? []).some((block) => block.type === "tool_use" && block.isError === true),
  );
  if (!failed) return;
  state.decisionsRead = true;
  try {
    const record = await api.permissionRecord(DECISIONS_READ);
    let changed = false;
    for (const decision of record.decisions ?? []) {
      const toolUseId = decision.request?.toolUseId;
      if (decision.decision === "deny" && typeof toolUseId === "string" && !state.refusedTools.has(toolUseId)) {
        state.refusedTools.add(toolUseId);
        changed = true;
      }
    }
    if (changed) render();
  } catch {
    // Not read: the calls stay marked as failed, which they are.
  }
}

async function refreshSessions() {
  try {
    state.sessions = (await api.sessions()).sessions;
  } catch {
    state.sessions = [];
  }
  renderSessions();
}

// --- Sending ----------------------------------------------------------------------

function newMessageId() {
  if (crypto.randomUUID) return crypto.randomUUID();
  // Not a secure context (a box served beyond loopback without TLS): 128 random bits.
  return [...crypto.getRandomValues(new Uint8Array(16))]
    .map((byte) => byte.toString(16).padStart(2, "0"))
    .join("");
}

function sendMessage(text, images) {
  const messageId = newMessageId();
  const entry = {
    uuid: `local-${messageId}`,
    messageId,
    type: "user",
    timestamp: new Date().toISOString(),
    content: [{ type: "text", text }],
    // The entries already shown can never be this message's echo.
    reconcileKnownUuids: state.entries.map((known) => known.uuid),
  };
  state.pending.push(entry);
  const item = { entry, images, state: "sending", tries: 0, timer: null };
  state.outbox.set(messageId, item);
  savePending();
  render({ toBottom: true });
  deliver(item);
}

async function deliver(item) {
  clearTimeout(item.timer);
  item.timer = null;
  item.state = "sending";
  item.tries += 1;
  render();
  const { entry, images } = item;
  try {
    const answer = await api.send(entryText(entry), entry.messageId, images);
    state.outbox.delete(entry.messageId);
    state.answers += 1;
    // A turn began: the chat is not stopped any more.
    if (answer?.turnId) state.stopped = false;
    setDelivery(entry.uuid, answer?.queued ? "queued" : "sent");
    if (answer?.queued) state.queuedAnswer.set(entry.uuid, state.answers);
    if (answer?.queued && state.status) state.status.queued = Math.max(state.status.queued, 1);
  } catch (error) {
    const status = error instanceof api.ApiError ? error.status : 0;
    if (status === 500) {
      // Recorded, not handed to the chat: the box's record still shows it.
      state.outbox.delete(entry.messageId);
      setDelivery(entry.uuid, "error");
    } else if (status === 401) {
      // Not logged in: kept (it survives the reload that logging in is) and sent then.
      item.state = "failed";
    } else if (status >= 400 && status < 500 && status !== 408 && status !== 429) {
      item.state = "rejected";
      announce(`Your message: ${stateLabel("rejected")}`);
      showNotice(`The box refused a message: ${error.message}`);
    } else {
      // Never reached the box, or no answer came back: try again with the same id.
      item.state = "failed";
      const delay = Math.min(FIRST_SEND_RETRY_MS * 2 ** (item.tries - 1), LONGEST_SEND_RETRY_MS);
      item.timer = setTimeout(() => deliver(item), delay);
    }
  }
  savePending();
  render();
}

/** A pending copy's delivery state; a change is read out ("Your message: Queued"). */
function setDelivery(uuid, delivery) {
  if (state.delivery.get(uuid) === delivery) return;
  state.delivery.set(uuid, delivery);
  announce(`Your message: ${stateLabel(delivery)}`);
}

/** A stop cleared the queue: the copies queued by the `mark`-th send answer were dropped. */
function stopSeen(mark) {
  state.stopMark = Math.max(state.stopMark ?? 0, mark);
  state.stopped = true;
}

/** A dropped copy stays as long as the box's record of accepted sends lists its text
 * (as a fresh page would show it), then goes: its echo will never retire it. */
function forgetDropped(accepted) {
  const listed = new Set(accepted.map((entry) => normalizeForCompare(entryText(entry))));
  const kept = state.pending.filter(
    (entry) => state.delivery.get(entry.uuid) !== "dropped" || listed.has(normalizeForCompare(entryText(entry))),
  );
  if (kept.length !== state.pending.length) retire(kept);
}

function retryUnsent() {
  for (const item of state.outbox.values()) {
    if (item.state === "failed") deliver(item);
  }
}

// --- Permission requests ----------------------------------------------------------

function addPermission(request) {
  const id = request?.id;
  if (typeof id !== "string" || state.permissions.has(id) || state.endedPermissions.has(id)) return;
  const card = { request, node: null, busy: false, error: null, focused: false };
  card.node = permissionNode(request, (decision, options) => answerPermission(card, decision, options));
  state.permissions.set(id, card);
}

function endPermission(id) {
  state.endedPermissions.delete(id);
  state.endedPermissions.add(id);
  if (state.endedPermissions.size > ENDED_PERMISSIONS_KEPT) {
    state.endedPermissions.delete(state.endedPermissions.values().next().value);
  }
  const card = state.permissions.get(id);
  if (card === undefined) return;
  state.permissions.delete(id);
  const hadFocus = card.focused || card.node.contains(document.activeElement);
  card.node.remove();
  // A keyboard stays where it was working: the next card, else the composer.
  if (hadFocus) {
    const next = state.permissions.values().next().value;
    (next?.node.querySelector("button") ?? ui.text).focus();
  }
}

/** Bootstrap's pending requests: add the new ones; drop the ones known before the read
 * began that it no longer lists (they ended while the page was not listening). */
function mergePermissions(pending, knownBefore) {
  const listed = new Set(pending.map((request) => request.id));
  for (const id of knownBefore) if (!listed.has(id)) endPermission(id);
  for (const request of pending) addPermission(request);
}

async function answerPermission(card, decision, options) {
  if (card.busy) return;
  const id = card.request.id;
  // Disabling the focused button drops the focus: remember where it was.
  card.focused = card.node.contains(document.activeElement);
  card.busy = true;
  card.error = null;
  setPermissionState(card.node, card);
  try {
    await api.answerPermission(id, decision, options);
    // Taken: the card goes now (the permission-ended event may come later, or not at
    // all while the stream is down).
    endPermission(id);
  } catch (error) {
    if (error instanceof api.ApiError && error.status === 409) {
      // Answered elsewhere, timed out or stopped: nothing left to answer.
      endPermission(id);
    } else {
      card.busy = false;
      card.error =
        error instanceof api.ApiError
          ? `The box did not take the answer: ${error.message}`
          : `Could not reach the box (${error.message}); try again.`;
      setPermissionState(card.node, card);
      if (card.focused && !card.node.contains(document.activeElement)) {
        card.node.querySelector("button")?.focus();
      }
    }
  }
  render();
}

// --- Live events ------------------------------------------------------------------

function onEvent(name, data) {
  switch (name) {
    case "turn-delta":
      // A piece of the assistant's text: shown at once, the finished message replaces it.
      if (state.viewing === null && typeof data.text === "string") {
        // `first`: a new message's first piece; what streamed before (a retried
        // attempt's text) is not part of it.
        state.streaming = data.first ? data.text : state.streaming + data.text;
        // The agent is writing, so it is busy: a turn it began itself (a background
        // sub-agent finished) has no `chat-turn` to say so.
        if (state.status && !state.status.busy) {
          state.status.busy = true;
          render();
        }
        renderStreamingSoon();
      }
      return;
    case "message":
      onTurnMessage(data.message ?? {});
      render();
      return;
    case "done":
      // The turn ended: text that never became a message is gone; the transcript has
      // the rest.
      state.streaming = "";
      render();
      refresh();
      return;
    case "turn-text":
      // An engine that streams no assistant message still shows its answer.
      if (state.live.size === 0 && data.text) {
        state.live.set("turn", data.text);
        state.streaming = "";
      }
      render();
      return;
    case "chat-turn":
      if (state.status) state.status.busy = true;
      state.stopped = false;
      render();
      refresh();
      return;
    case "close":
      // The run ended: `code` 0 after a deliberate stop (this page's or another's).
      if (data.code === 0) {
        if (!state.stopAsked) stopSeen(state.answers);
        state.stopAsked = false;
      } else {
        state.stopped = false;
      }
      refresh();
      return;
    case "session-id":
      refresh();
      refreshSessions();
      return;
    case "start-failed":
      showNotice(`The chat could not start: ${data.reason ?? "unknown reason"}`);
      refresh();
      return;
    case "permission-request":
      addPermission(data.request);
      render();
      return;
    case "permission-ended":
      endPermission(data.id);
      render();
      return;
    case "task": {
      // A sub-agent started: its call's fold can show its work before the call ends.
      const task = data.message?.task ?? {};
      if (task.phase === "started" && typeof task.toolUseId === "string" && typeof task.taskId === "string") {
        state.startedAgents.set(task.toolUseId, task.taskId);
        readUntilShown(task.toolUseId);
      } else {
        refresh();
      }
      return;
    }
    case "turn-error":
      // The agent's own words for a turn it could not finish (an API error, a limit).
      showNotice(`The agent could not answer: ${data.error ?? "unknown error"}`);
      return;
    default:
      // chat-user-message, events-lost: the state has moved on.
      refresh();
  }
}

function onTurnMessage(message) {
  if (state.viewing !== null) return;
  // A sub-agent's message answers the call that started it, not the person: it is
  // neither shown as the reply nor read out, and the text streaming is not its.
  const call = subAgentCall(message);
  if (call !== null) {
    readSubAgentOf(call);
    return;
  }
  const content = message.message?.content ?? [];
  if (message.type === "assistant") {
    const text = content
      .filter((block) => block.type === "text")
      .map((block) => block.text)
      .join("");
    const uuid = message.uuid ?? `live-${state.live.size}`;
    if (text !== "" && !state.announced.has(uuid)) {
      state.live.set(uuid, text);
      state.announced.add(uuid);
      announceMessage(text);
    }
    // The finished message replaces the text that streamed for it.
    state.streaming = "";
  }
  // A tool call or its result: the transcript has it now (the CLI writes as it goes).
  if (content.some((block) => block.type === "tool_use" || block.type === "tool_result")) refresh();
}

// --- Announcements ----------------------------------------------------------------

// What each live region is to say at its next frame.
const toSay = new Map();

/** Put `text` in a live region for a screen reader to read: the region is emptied
 * and filled in the next frame (so the same words said twice are read twice), with
 * everything said in the meantime. */
function say(region, text) {
  const queued = toSay.get(region);
  if (queued !== undefined) {
    queued.push(text);
    return;
  }
  toSay.set(region, [text]);
  region.textContent = "";
  requestAnimationFrame(() => {
    region.textContent = toSay.get(region).join(" ");
    toSay.delete(region);
  });
}

/** Say `text` politely: the reply, a message's state, a page loaded. */
function announce(text) {
  say(ui.announcer, text);
}

/** A new message of the box, as its words read (the Markdown rendered, not its marks). */
function announceMessage(text) {
  const words = markdownNode(text).textContent.replace(/\s+/g, " ").trim();
  if (words === "") return;
  announce(`Box: ${words.length > ANNOUNCED_CHARS ? `${words.slice(0, ANNOUNCED_CHARS)}…` : words}`);
}

// Stops the event stream (once logged out nothing can be read).
let stopListening = null;

function connectEvents() {
  stopListening = api.listen({
    onOpen() {
      state.online = true;
      render();
      refresh();
      retryUnsent();
    },
    onDown(delayMs) {
      state.online = false;
      renderStatus(delayMs);
      renderControls();
      // An EventSource does not tell a 401 from a box that is down: a read does (the
      // lightest one, which leaves the chat's state to the next connection).
      refreshSessions();
    },
    onEvent,
  });
}

// --- Rendering --------------------------------------------------------------------

// Whether the view follows the newest message: true at the bottom, false once the
// person scrolls up. Content that grows later (a photo arriving after its history, a
// card, a narrower window) keeps a pinned view at the bottom.
let pinned = true;

function nearBottom() {
  return ui.log.scrollHeight - ui.log.scrollTop - ui.log.clientHeight < STICK_TO_BOTTOM_PX;
}

function scrollToBottom() {
  ui.log.scrollTop = ui.log.scrollHeight;
  pinned = true;
}

function keepPinned() {
  // Only the person moves the view away: growth does not fire "scroll", theirs does.
  ui.log.addEventListener("scroll", () => (pinned = nearBottom()), { passive: true });
  const grown = new ResizeObserver(() => {
    if (pinned) scrollToBottom();
  });
  for (const node of [ui.log, ui.messages, ui.permissions]) grown.observe(node);
}

// The nodes already built, by key, so a re-render builds only what is new or changed
// (and keeps photos that have loaded).
const nodeCache = new Map();

function cachedNode(key, signature, build) {
  const cached = nodeCache.get(key);
  if (cached !== undefined && cached.signature === signature) return cached.node;
  const node = build();
  nodeCache.set(key, { signature, node });
  return node;
}

/** The ids of an entry's tool calls a person refused, as a cache signature. */
function refusalsOf(entry) {
  let refused = "";
  for (const block of entry.content ?? []) {
    if (block.type === "tool_use" && block.isError === true && state.refusedTools.has(block.toolId)) {
      refused += `${block.toolId} `;
    }
  }
  return refused;
}

/** An entry's sub-agent groups, as a cache signature: which of its calls has one. */
function subAgentsOf(entry, byCall) {
  let groups = "";
  for (const block of entry.content ?? []) {
    if (startsSubAgent(block) && (agentOf(block) || byCall.has(block.toolId))) groups += `${block.toolId} `;
  }
  return groups;
}

/** A transcript entry's node. The same entry object is the same node at once; a fresh
 * copy read again is compared by content, so a re-read tail rebuilds only what grew. */
function entryNode(entry, byCall) {
  const refused = refusalsOf(entry) + subAgentsOf(entry, byCall);
  const cached = nodeCache.get(entry.uuid);
  if (cached !== undefined && cached.refused === refused) {
    if (cached.entry === entry) return cached.node;
    if (cached.content === undefined) cached.content = JSON.stringify(cached.entry.content);
    const content = JSON.stringify(entry.content);
    if (content === cached.content) {
      cached.entry = entry;
      return cached.node;
    }
  }
  const node = shownEntryNode(entry, byCall);
  nodeCache.set(entry.uuid, { entry, refused, node });
  return node;
}

function shownEntryNode(entry, byCall) {
  return messageNode(entry, {
    refused: (block) => state.refusedTools.has(block.toolId),
    subAgent: (block) => subAgentGroupNode(block, byCall),
  });
}

// --- Sub-agents -------------------------------------------------------------------

// The sub-agent folds built, by key, kept across renders: a rebuilt message takes its
// calls' folds as they are (open or not, with what they have loaded).
const subAgentGroups = new Map();
const NO_INLINE_GROUPS = new Map();

/** What a sub-agent was asked to do, for its fold's label. */
function subAgentDescription(block) {
  const input = block.input ?? {};
  for (const key of ["description", "subagent_type", "prompt"]) {
    if (typeof input[key] === "string" && input[key].trim() !== "") return input[key].trim();
  }
  return "";
}

/** The sub-agent a call names: its result's `agentId`, or the one a `task` event
 * said it started (the call still running). */
function agentOf(block) {
  return block.agentId || state.startedAgents.get(block.toolId) || null;
}

/** The fold of the work a Task or Agent call started, or null when it has none to
 * show: a sub-agent it names (read when opened), else the turns grouped under it. */
function subAgentGroupNode(block, byCall) {
  if (!startsSubAgent(block)) return null;
  const session = state.shownSessionId;
  const agentId = agentOf(block);
  if (agentId !== null && session !== null) {
    const key = `agent:${session}:${agentId}`;
    let group = subAgentGroups.get(key);
    if (group === undefined) {
      group = { session, agentId, call: block.toolId, loaded: [], total: null, reading: null };
      group.view = subAgentNode(subAgentDescription(block), {
        onOpen: () => {
          if (group.total === null || !group.finished) readSubAgent(group, { fromStart: true });
        },
        build: (entry) => shownEntryNode(entry, NO_INLINE_GROUPS),
      });
      subAgentGroups.set(key, group);
    }
    // A call without its result is still running: its fold reads again while open,
    // and once more when the result comes (what the sub-agent did last).
    const finished = block.resultSummary !== undefined;
    if (finished && group.finished === false && group.total !== null) group.stale = true;
    group.finished = finished;
    return group.view.node;
  }
  const inline = byCall.get(block.toolId);
  return inline === undefined ? null : inlineGroup(`call:${block.toolId}`, subAgentDescription(block), inline).node;
}

/** A fold of turns already in the session's history (Claude Code up to 1.0.x). */
function inlineGroup(key, description, entries) {
  let group = subAgentGroups.get(key);
  if (group === undefined) {
    group = { view: subAgentNode(description, { build: (entry) => shownEntryNode(entry, NO_INLINE_GROUPS) }) };
    subAgentGroups.set(key, group);
  }
  const signature = entries.map((entry) => entry.uuid).join(" ");
  if (group.signature !== signature) {
    group.signature = signature;
    group.view.show(entries);
  }
  return group.view;
}

/** A group with no call to stand under, as an item of the conversation. */
function looseGroupNode({ entries }) {
  const key = `loose:${entries[0].uuid}`;
  const view = inlineGroup(key, "", entries);
  const group = subAgentGroups.get(key);
  if (group.item === undefined) {
    group.item = document.createElement("li");
    group.item.className = "message subagent-loose";
    group.item.append(view.node);
  }
  return group.item;
}

/** Read a sub-agent's history into its fold: its first page again (`fromStart`, as
 * much as was shown), or the next page after what is shown. */
async function readSubAgent(group, { fromStart }) {
  if (group.reading !== null) {
    // A read asked for while one runs comes after it: it may see more.
    if (fromStart) group.again = true;
    return group.reading;
  }
  const offset = fromStart ? 0 : group.loaded.length;
  const limit = fromStart ? Math.max(SUB_AGENT_PAGE_SIZE, group.loaded.length) : SUB_AGENT_PAGE_SIZE;
  group.view.loading();
  group.reading = (async () => {
    try {
      const page = await api.subAgentHistory(group.session, group.agentId, offset, Math.min(limit, 5000));
      group.loaded = fromStart ? page.entries : [...group.loaded, ...page.entries];
      group.total = page.total;
      const more = group.loaded.length < group.total ? () => readSubAgent(group, { fromStart: false }) : null;
      group.view.show(group.loaded, { total: group.total, more });
    } catch (error) {
      if (error instanceof api.ApiError && error.status === 404 && !group.finished) {
        // Just started: Claude Code has not written its transcript yet.
        group.view.show([], { total: 0 });
      } else {
        group.view.fail(`Could not read the sub-agent's work: ${error.message}`);
      }
    } finally {
      group.reading = null;
      group.view.loaded();
    }
    if (group.again) {
      group.again = false;
      await readSubAgent(group, { fromStart: true });
    }
  })();
  return group.reading;
}

// How often, and how far apart at first, the page reads again for a call the CLI
// has not written yet (it writes as it goes, a moment after it says so).
const CALL_READS = 6;
const CALL_READ_DELAY_MS = 150;

/** Read the history until it shows the call `toolUseId` (a sub-agent's, started): the
 * event can come before the call's line is in the transcript, and nothing else may
 * come until the sub-agent ends. A few reads, each further apart. */
async function readUntilShown(toolUseId) {
  const shown = () =>
    state.entries.some((entry) => (entry.content ?? []).some((block) => block.toolId === toolUseId));
  for (let read = 0; read < CALL_READS; read += 1) {
    await refresh();
    if (shown() || state.viewing !== null) return;
    await new Promise((resolve) => setTimeout(resolve, CALL_READ_DELAY_MS * 2 ** read));
  }
}

/** Is this the fold of a sub-agent's own transcript, open on the page? */
function isOpenAgentFold(group) {
  return group.agentId !== undefined && group.view.node.open && group.view.node.isConnected;
}

/** The open folds of sub-agents still running, or just finished, read their work again. */
function refreshRunningSubAgents() {
  for (const group of subAgentGroups.values()) {
    const due = !group.finished || group.stale === true;
    if (due && isOpenAgentFold(group)) {
      group.stale = false;
      readSubAgent(group, { fromStart: true });
    }
  }
}

/** The sub-agent of call `call` said something: its fold, if open, reads its work again
 * (the sub-agent's transcript has it; the conversation's own history has nothing new). */
function readSubAgentOf(call) {
  for (const group of subAgentGroups.values()) {
    if (group.call === call && isOpenAgentFold(group)) readSubAgent(group, { fromStart: true });
  }
}

/** Make `parent`'s children exactly `nodes`, touching only what differs: an earlier
 * page is inserted before the first node shown, a new message appended, and the
 * nodes already in place are neither moved nor rebuilt. */
function syncChildren(parent, nodes) {
  let current = parent.firstChild;
  for (const node of nodes) {
    if (node === current) {
      current = current.nextSibling;
    } else {
      parent.insertBefore(node, current);
    }
  }
  while (current !== null) {
    const next = current.nextSibling;
    current.remove();
    current = next;
  }
}

// The node of the text streaming now, updated in place as pieces come.
const streamingView = { node: null, text: null };

function streamingNode() {
  if (streamingView.node === null || streamingView.text !== state.streaming) {
    const node = liveNode("streaming", state.streaming);
    if (streamingView.node !== null && streamingView.node.isConnected) {
      streamingView.node.replaceChildren(...node.childNodes);
    } else {
      streamingView.node = node;
    }
    streamingView.text = state.streaming;
  }
  return streamingView.node;
}

let streamingFrame = null;
let streamingDirty = false;

/** Show the streaming text now, and at most once a frame: a piece that comes after a
 * quiet frame is on the page at once; pieces that come faster than frames are
 * rendered together at the next one. Only the streaming node changes while it is on
 * the page. */
function renderStreamingSoon() {
  if (streamingFrame !== null) {
    streamingDirty = true;
    return;
  }
  renderStreaming();
  streamingFrame = requestAnimationFrame(() => {
    streamingFrame = null;
    if (streamingDirty) {
      streamingDirty = false;
      renderStreaming();
    }
  });
}

function renderStreaming() {
  if (streamingView.node?.isConnected && state.streaming !== "") {
    streamingNode();
    if (pinned) scrollToBottom();
  } else {
    render();
  }
}

function deliveryOf(entry) {
  const unsent = entry.messageId ? state.outbox.get(entry.messageId) : undefined;
  if (unsent !== undefined) return unsent.state;
  const known = state.delivery.get(entry.uuid);
  if (known !== undefined) return known;
  // The box's record says a stop dropped it (`dropped`): not sent, not on its way.
  if (entry.dropped === true) return "dropped";
  return entry.uuid.startsWith("accepted-") ? "accepted" : "sent";
}

function pendingNode(entry) {
  const delivery = deliveryOf(entry);
  const unsent = entry.messageId ? state.outbox.get(entry.messageId) : undefined;
  const previews = unsent?.previews ?? [];
  const signature = `${delivery}|${previews.length}`;
  return cachedNode(`pending:${entry.uuid}`, signature, () =>
    messageNode(entry, {
      state: delivery,
      previews,
      onRetry: delivery === "failed" ? () => deliver(unsent) : null,
    }),
  );
}

function render({ toBottom = false, keepPosition = false } = {}) {
  const log = ui.log;
  const distanceFromEnd = log.scrollHeight - log.scrollTop;

  const showingChat = state.viewing === null;
  // A sub-agent's turns are folded under their calls, never the conversation's own.
  const { main, byCall, loose } = groupSidechains(state.entries);
  const joined = reconcilePending(main, showingChat ? state.pending : []);
  if (showingChat) retire(joined.pendingMessages);

  const nodes = [];
  const pendingUuids = new Set(state.pending.map((entry) => entry.uuid));
  const looseAfter = new Map(loose.map((group) => [group.after, group]));
  if (looseAfter.has(null)) nodes.push(looseGroupNode(looseAfter.get(null)));
  for (const entry of joined.messages) {
    if (pendingUuids.has(entry.uuid)) {
      nodes.push(pendingNode(entry));
    } else {
      nodes.push(entryNode(entry, byCall));
      if (looseAfter.has(entry.uuid)) nodes.push(looseGroupNode(looseAfter.get(entry.uuid)));
    }
  }
  // Unanswered sends the join does not show (a photo with no text) still show until answered.
  for (const item of state.outbox.values()) {
    if (!pendingUuids.has(item.entry.uuid)) nodes.push(pendingNode(item.entry));
  }
  if (showingChat) {
    for (const [key, text] of state.live) nodes.push(cachedNode(`live:${key}`, text, () => liveNode(key, text)));
    if (state.streaming !== "") nodes.push(streamingNode());
  }

  syncChildren(ui.messages, nodes);
  const cardAdded = renderPermissions();
  ui.empty.hidden = nodes.length > 0 || state.permissions.size > 0 || state.loggedOut;
  ui.loadEarlier.hidden = state.firstIndex === 0 || state.loggedOut;

  if (keepPosition) {
    log.scrollTop = log.scrollHeight - distanceFromEnd;
    pinned = nearBottom();
  } else if (toBottom || cardAdded || pinned) {
    scrollToBottom();
  }
  renderStatus();
  renderControls();
}

/** The permission cards, after the conversation; true when one was added. Cards are
 * moved only when added or removed, so a half-typed reason keeps its focus. */
function renderPermissions() {
  const wanted = new Set([...state.permissions.values()].map((card) => card.node));
  for (const node of [...ui.permissions.children]) if (!wanted.has(node)) node.remove();
  let added = false;
  for (const node of wanted) {
    if (node.parentNode !== ui.permissions) {
      ui.permissions.append(node);
      added = true;
    }
  }
  return added;
}

/** Keep only what is still owed; drop the node cache of what the transcript retired. */
function retire(stillPending) {
  const kept = new Set(stillPending.map((entry) => entry.uuid));
  for (const entry of state.pending) {
    if (kept.has(entry.uuid)) continue;
    state.delivery.delete(entry.uuid);
    state.queuedAnswer.delete(entry.uuid);
    nodeCache.delete(`pending:${entry.uuid}`);
    // Its echo is in the transcript, so the box has it: stop retrying.
    if (entry.messageId && normalizeForCompare(entryText(entry)) !== "") {
      const unsent = state.outbox.get(entry.messageId);
      if (unsent) clearTimeout(unsent.timer);
      state.outbox.delete(entry.messageId);
    }
  }
  if (kept.size !== state.pending.length) {
    state.pending = stillPending;
    savePending();
  }
}

function renderStatus(retryInMs = null) {
  let text = "Ready";
  let mode = "idle";
  const queued = state.status?.queued ?? 0;
  if (state.loggedOut) {
    mode = "offline";
    text = "Not logged in";
  } else if (!state.online) {
    mode = "offline";
    text = retryInMs === null ? "Connecting…" : `Offline — reconnecting in ${Math.ceil(retryInMs / 1000)} s`;
  } else if (state.status?.phase === "stopping") {
    mode = "busy";
    text = "Stopping…";
  } else if (state.status?.busy) {
    mode = "busy";
    const asking = state.permissions.size;
    text = asking > 0 ? `Waiting for your approval${asking > 1 ? ` (${asking})` : ""}` : "Working…";
    if (queued > 0) text = `${text} · ${queued} queued`;
  } else if (state.status?.phase === "starting") {
    mode = "busy";
    text = "Starting…";
  } else if (state.status?.running === false) {
    // No run (stopped, or none yet): the next message starts one, in this conversation.
    text = state.stopped ? "Stopped · Send starts the agent again" : "Not running · Send starts the agent";
    if (queued > 0) text = `${text} · ${queued} queued, to go with your next message`;
  }
  if (state.viewing !== null) text = `${text} · viewing an earlier session`;
  ui.status.textContent = text;
  ui.status.dataset.state = mode;
}

/** Stop, Restart and Load earlier say they are unavailable with aria-disabled, not
 * `disabled`: a disabled button drops the focus to the page, and a keyboard that has
 * just pressed Stop must still be on Stop. Their handlers check it. */
function setUnavailable(button, unavailable) {
  button.setAttribute("aria-disabled", String(unavailable));
}

const unavailable = (button) => button.getAttribute("aria-disabled") === "true";

function renderControls() {
  const busy = Boolean(state.status?.busy || state.status?.running);
  // A stop under way has nothing more to stop.
  setUnavailable(ui.stop, !state.online || !busy || state.status?.phase === "stopping");
  setUnavailable(ui.restart, !state.online || !state.status?.running);
  const closed = state.viewing !== null || state.loggedOut;
  ui.text.disabled = closed;
  ui.send.disabled = closed;
  ui.fileInput.disabled = closed;
}

function renderSessions() {
  const hasList = state.sessions.length > 0;
  ui.sessions.hidden = !hasList;
  ui.toggleSessions.hidden = !hasList;
  const shown = state.viewing ?? state.chatSessionId;
  ui.sessionList.replaceChildren(
    ...state.sessions.map((session) =>
      sessionNode(session, {
        current: session.sessionId === shown,
        onOpen: () => openSession(session.sessionId),
      }),
    ),
  );
}

function renderAttachments() {
  ui.attachments.replaceChildren(
    ...state.attachments.map((attachment, index) => {
      const item = document.createElement("li");
      const preview = document.createElement("img");
      preview.src = attachment.url;
      preview.alt = `Photo ${index + 1} to send`;
      const remove = document.createElement("button");
      remove.type = "button";
      remove.className = "remove";
      // The name is the hidden words; the × is only their picture.
      const cross = document.createElement("span");
      cross.setAttribute("aria-hidden", "true");
      cross.textContent = "×";
      const words = document.createElement("span");
      words.className = "visually-hidden";
      words.textContent = `Remove photo ${index + 1}`;
      remove.append(cross, words);
      remove.addEventListener("click", () => {
        URL.revokeObjectURL(attachment.url);
        state.attachments.splice(index, 1);
        renderAttachments();
        // The button is gone with its photo: the keyboard goes on in the composer.
        ui.text.focus();
      });
      item.append(preview, remove);
      return item;
    }),
  );
}

function showNotice(text, action = null) {
  ui.notice.replaceChildren(text);
  if (action !== null) {
    const button = document.createElement("button");
    button.type = "button";
    button.textContent = action.label;
    button.addEventListener("click", action.run);
    ui.notice.append(button);
  }
  ui.notice.hidden = false;
}

function hideNotice() {
  ui.notice.hidden = true;
}

// --- Sessions -----------------------------------------------------------------------

async function openSession(sessionId) {
  state.viewing = sessionId === state.chatSessionId ? null : sessionId;
  state.shownSessionId = null;
  state.entries = [];
  state.firstIndex = 0;
  setSessionsOpen(false, { returnFocus: false });
  if (state.viewing !== null) {
    showNotice("An earlier session, read only.", { label: "Back to the chat", run: () => openSession(state.chatSessionId) });
  } else {
    hideNotice();
  }
  renderSessions();
  await refresh();
  render({ toBottom: true });
}

// --- The composer -------------------------------------------------------------------

function readPhoto(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.addEventListener("load", () => {
      // A data: URL; the box wants the base64 after the comma.
      const data = String(reader.result).split(",", 2)[1] ?? "";
      resolve({ mediaType: file.type, data, url: URL.createObjectURL(file) });
    });
    reader.addEventListener("error", () => reject(reader.error));
    reader.readAsDataURL(file);
  });
}

async function attach(files) {
  for (const file of files) {
    if (!PHOTO_TYPES.has(file.type)) {
      showNotice(`${file.name || "That file"} is not a photo the box keeps (PNG, JPEG, GIF, WebP).`);
      continue;
    }
    state.attachments.push(await readPhoto(file));
  }
  renderAttachments();
}

function submit() {
  if (state.viewing !== null || state.loggedOut) return;
  const text = ui.text.value.trim();
  if (text === "" && state.attachments.length === 0) return;
  const attachments = state.attachments;
  state.attachments = [];
  renderAttachments();
  ui.text.value = "";
  fitComposer();
  sendMessage(
    text,
    attachments.map(({ mediaType, data }) => ({ mediaType, data })),
  );
  const item = [...state.outbox.values()].at(-1);
  if (item) {
    item.previews = attachments.map(({ url }) => url);
    nodeCache.delete(item.entry.uuid);
    render({ toBottom: true });
  }
}

function fitComposer() {
  ui.text.style.height = "auto";
  ui.text.style.height = `${ui.text.scrollHeight + 2}px`;
}

function wireComposer() {
  ui.composer.addEventListener("submit", (event) => {
    event.preventDefault();
    submit();
  });
  ui.text.addEventListener("keydown", (event) => {
    // Enter sends; Shift+Enter (or an IME composing text) makes a new line.
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      submit();
    }
  });
  ui.text.addEventListener("input", fitComposer);
  ui.text.addEventListener("paste", (event) => {
    const files = [...(event.clipboardData?.files ?? [])];
    if (files.length > 0) {
      event.preventDefault();
      attach(files);
    }
  });
  ui.fileInput.addEventListener("change", () => {
    attach([...ui.fileInput.files]);
    ui.fileInput.value = "";
  });
  for (const name of ["dragenter", "dragover"]) {
    ui.composer.addEventListener(name, (event) => {
      event.preventDefault();
      ui.composer.classList.add("dragging");
    });
  }
  ui.composer.addEventListener("dragleave", () => ui.composer.classList.remove("dragging"));
  ui.composer.addEventListener("drop", (event) => {
    event.preventDefault();
    ui.composer.classList.remove("dragging");
    attach([...(event.dataTransfer?.files ?? [])]);
  });
}

// --- Logging in ---------------------------------------------------------------------

/** The box answered 401: say once how to get in, stop listening, offer nothing else. */
function loggedOut() {
  if (state.loggedOut) return;
  state.loggedOut = true;
  state.online = false;
  stopListening?.();
  hideNotice();
  ui.login.hidden = false;
  render();
  ui.loginToken.focus();
  // The focus lands in the token field; the notice itself is read out too.
  say(ui.alert, `${ui.login.querySelector("h2").textContent}. ${ui.login.querySelector("p").textContent.replace(/\s+/g, " ")}`);
}

function wireLogin() {
  api.onUnauthorized(loggedOut);
  ui.login.addEventListener("submit", (event) => {
    event.preventDefault();
    // The login URL: the box sets the cookie and redirects to the page without it.
    window.location.assign(`/?token=${encodeURIComponent(ui.loginToken.value.trim())}`);
  });
}

// --- Start --------------------------------------------------------------------------

// --- The session list: beside the chat, or a dialog over it on a narrow screen -----

/** Open or close the session list. On a narrow screen it is a modal dialog: the chat
 * behind it is inert (Tab cannot reach it), Tab cycles within the list, and Escape or
 * Close gives the focus back to the Sessions button. */
function setSessionsOpen(open, { returnFocus = true } = {}) {
  const wasOpen = ui.sessions.classList.contains("open");
  ui.sessions.classList.toggle("open", open);
  ui.toggleSessions.setAttribute("aria-expanded", String(open));
  const modal = open && NARROW.matches;
  if (modal) {
    ui.sessions.setAttribute("role", "dialog");
    ui.sessions.setAttribute("aria-modal", "true");
  } else {
    ui.sessions.removeAttribute("role");
    ui.sessions.removeAttribute("aria-modal");
  }
  ui.chat.inert = modal;
  if (open) {
    (ui.sessionList.querySelector('[aria-current="true"]') ?? ui.sessionList.querySelector("button") ?? ui.closeSessions).focus();
  } else if (wasOpen && returnFocus) {
    ui.toggleSessions.focus();
  }
}

function trapSessionsFocus(event) {
  if (event.key !== "Tab" || ui.sessions.getAttribute("aria-modal") !== "true") return;
  const focusable = [...ui.sessions.querySelectorAll("button:not([disabled])")].filter((node) => node.offsetParent !== null);
  if (focusable.length === 0) return;
  const first = focusable[0];
  const last = focusable[focusable.length - 1];
  if (event.shiftKey && (document.activeElement === first || !ui.sessions.contains(document.activeElement))) {
    event.preventDefault();
    last.focus();
  } else if (!event.shiftKey && (document.activeElement === last || !ui.sessions.contains(document.activeElement))) {
    event.preventDefault();
    first.focus();
  }
}

function wireControls() {
  ui.loadEarlier.addEventListener("click", () => {
    if (!unavailable(ui.loadEarlier)) loadEarlier();
  });
  ui.stop.addEventListener("click", async () => {
    if (unavailable(ui.stop)) return;
    // The sends answered by now were queued before the stop, which clears the queue.
    const mark = state.answers;
    // This stop's `close` event may come before its answer: it is this stop, not another.
    state.stopAsked = true;
    try {
      state.status = (await api.stop()).status;
      stopSeen(mark);
    } catch (error) {
      state.stopAsked = false;
      showNotice(`Stop failed: ${error.message}`);
    }
    render();
    refresh();
  });
  ui.restart.addEventListener("click", async () => {
    if (unavailable(ui.restart)) return;
    try {
      state.status = (await api.restart()).status;
    } catch (error) {
      showNotice(`Restart failed: ${error.message}`);
    }
    refresh();
  });
  ui.toggleSessions.addEventListener("click", () => setSessionsOpen(!ui.sessions.classList.contains("open")));
  ui.closeSessions.addEventListener("click", () => setSessionsOpen(false));
  document.addEventListener("keydown", (event) => {
    // Escape closes the folded-out session list on a narrow screen.
    if (event.key === "Escape" && ui.sessions.classList.contains("open")) setSessionsOpen(false);
    trapSessionsFocus(event);
  });
  // Widened past the fold: the list is beside the chat again, not a dialog over it.
  NARROW.addEventListener("change", () => {
    if (ui.sessions.classList.contains("open")) setSessionsOpen(false, { returnFocus: false });
  });
  // A code block's Copy button reports through the live region.
  ui.messages.addEventListener("bbx-announce", (event) => announce(event.detail));
}

/** Read the box first: a browser that is not logged in opens no event stream. */
async function start() {
  await refresh();
  if (state.loggedOut) return;
  connectEvents();
  refreshSessions();
}

restorePending();
keepPinned();
wireLogin();
wireComposer();
wireControls();
render();
ui.text.focus();
start();
