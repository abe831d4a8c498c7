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

import * as api from "./api.js";
import {
  entryText,
  mergeAcceptedIntoPending,
  normalizeForCompare,
  reconcilePending,
} from "./reconcile.js";
import { liveNode, messageNode, permissionNode, sessionNode, setPermissionState } from "./view.js";

// How many entries a history read asks for at a time.
const PAGE_SIZE = 40;
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
  // The turn as it streams in: assistant messages by uuid, and partial text.
  live: new Map(),
  streaming: "",
  attachments: [],
  sessions: [],
  // Pending permission requests, oldest first, by id: {request, node, busy, error, focused}.
  permissions: new Map(),
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

async function loadEarlier() {
  if (state.firstIndex === 0 || state.shownSessionId === null) return;
  const limit = Math.min(PAGE_SIZE, state.firstIndex);
  const offset = state.firstIndex - limit;
  ui.loadEarlier.disabled = true;
  try {
    const page = await api.historyPage(state.shownSessionId, offset, limit);
    const known = new Set(state.entries.map((entry) => entry.uuid));
    state.entries = [...page.entries.filter((entry) => !known.has(entry.uuid)), ...state.entries];
    state.firstIndex = offset;
    render({ keepPosition: true });
  } catch (error) {
    showNotice(`Could not load earlier messages: ${error.message}`);
  } finally {
    ui.loadEarlier.disabled = false;
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
  if (boot.history) mergeTail(boot.history.entries, boot.history.total);
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
          state.delivery.set(uuid, dropped ? "dropped" : "sent");
          state.queuedAnswer.delete(uuid);
        }
      }
    }
    forgetDropped(boot.pending ?? []);
  }
  mergePermissions(boot.permissions ?? [], permissionsBefore);
  const shown = new Set(state.entries.map((entry) => entry.uuid));
  for (const uuid of state.live.keys()) if (shown.has(uuid)) state.live.delete(uuid);
  if (!boot.status.busy) {
    state.live.clear();
    state.streaming = "";
  }
  render({ toBottom: firstRead });
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
    state.delivery.set(entry.uuid, answer?.queued ? "queued" : "sent");
    if (answer?.queued) state.queuedAnswer.set(entry.uuid, state.answers);
    if (answer?.queued && state.status) state.status.queued = Math.max(state.status.queued, 1);
  } catch (error) {
    const status = error instanceof api.ApiError ? error.status : 0;
    if (status === 500) {
      // Recorded, not handed to the chat: the box's record still shows it.
      state.outbox.delete(entry.messageId);
      state.delivery.set(entry.uuid, "error");
    } else if (status === 401) {
      // Not logged in: kept (it survives the reload that logging in is) and sent then.
      item.state = "failed";
    } else if (status >= 400 && status < 500 && status !== 408 && status !== 429) {
      item.state = "rejected";
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
    case "message":
      onTurnMessage(data.message ?? {});
      render();
      return;
    case "turn-text":
      // An engine that streams no assistant message still shows its answer.
      if (state.live.size === 0 && data.text) state.live.set("turn", data.text);
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
    case "turn-error":
      // The agent's own words for a turn it could not finish (an API error, a limit).
      showNotice(`The agent could not answer: ${data.error ?? "unknown error"}`);
      return;
    default:
      // chat-user-message, done, task, events-lost: the state has moved on.
      refresh();
  }
}

function onTurnMessage(message) {
  if (message.type === "assistant") {
    const text = (message.message?.content ?? [])
      .filter((block) => block.type === "text")
      .map((block) => block.text)
      .join("");
    if (text !== "") state.live.set(message.uuid ?? `live-${state.live.size}`, text);
    state.streaming = "";
  } else if (message.type === "stream_event") {
    const delta = message.event?.delta;
    if (message.event?.type === "content_block_delta" && delta?.type === "text_delta") {
      state.streaming += delta.text ?? "";
    }
  }
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

// The nodes already built, by key, so a re-render keeps photos that have loaded.
const nodeCache = new Map();

function cachedNode(key, signature, build) {
  const cached = nodeCache.get(key);
  if (cached !== undefined && cached.signature === signature) return cached.node;
  const node = build();
  nodeCache.set(key, { signature, node });
  return node;
}

function deliveryOf(entry) {
  const unsent = entry.messageId ? state.outbox.get(entry.messageId) : undefined;
  if (unsent !== undefined) return unsent.state;
  return state.delivery.get(entry.uuid) ?? (entry.uuid.startsWith("accepted-") ? "accepted" : "sent");
}

function pendingNode(entry) {
  const delivery = deliveryOf(entry);
  const unsent = entry.messageId ? state.outbox.get(entry.messageId) : undefined;
  const previews = unsent?.previews ?? [];
  const signature = `${delivery}|${previews.length}`;
  return cachedNode(entry.uuid, signature, () =>
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
  const joined = reconcilePending(state.entries, showingChat ? state.pending : []);
  if (showingChat) retire(joined.pendingMessages);

  const nodes = [];
  const pendingUuids = new Set(state.pending.map((entry) => entry.uuid));
  for (const entry of joined.messages) {
    if (pendingUuids.has(entry.uuid)) {
      nodes.push(pendingNode(entry));
    } else {
      nodes.push(cachedNode(entry.uuid, JSON.stringify(entry.content), () => messageNode(entry)));
    }
  }
  // Unanswered sends the join does not show (a photo with no text) still show until answered.
  for (const item of state.outbox.values()) {
    if (!pendingUuids.has(item.entry.uuid)) nodes.push(pendingNode(item.entry));
  }
  if (showingChat) {
    for (const [key, text] of state.live) nodes.push(cachedNode(`live:${key}`, text, () => liveNode(key, text)));
    if (state.streaming !== "") nodes.push(liveNode("streaming", state.streaming));
  }

  const current = [...ui.messages.children];
  if (current.length !== nodes.length || current.some((node, index) => node !== nodes[index])) {
    ui.messages.replaceChildren(...nodes);
  }
  const cardAdded = renderPermissions();
  ui.empty.hidden = nodes.length > 0 || state.permissions.size > 0 || state.loggedOut;
  ui.loadEarlier.hidden = state.firstIndex === 0;

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
    nodeCache.delete(entry.uuid);
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

function renderControls() {
  const busy = Boolean(state.status?.busy || state.status?.running);
  // A stop under way has nothing more to stop.
  ui.stop.disabled = !state.online || !busy || state.status?.phase === "stopping";
  ui.restart.disabled = !state.online || !state.status?.running;
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
      remove.textContent = "×";
      remove.setAttribute("aria-label", `Remove photo ${index + 1}`);
      remove.addEventListener("click", () => {
        URL.revokeObjectURL(attachment.url);
        state.attachments.splice(index, 1);
        renderAttachments();
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
  ui.sessions.classList.remove("open");
  ui.toggleSessions.setAttribute("aria-expanded", "false");
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

function wireControls() {
  ui.loadEarlier.addEventListener("click", loadEarlier);
  ui.stop.addEventListener("click", async () => {
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
    try {
      state.status = (await api.restart()).status;
    } catch (error) {
      showNotice(`Restart failed: ${error.message}`);
    }
    refresh();
  });
  ui.toggleSessions.addEventListener("click", () => {
    const open = ui.sessions.classList.toggle("open");
    ui.toggleSessions.setAttribute("aria-expanded", String(open));
    if (open) ui.sessionList.querySelector("button")?.focus();
  });
  document.addEventListener("keydown", (event) => {
    // Escape closes the folded-out session list on a narrow screen.
    if (event.key === "Escape" && ui.sessions.classList.contains("open")) {
      ui.sessions.classList.remove("open");
      ui.toggleSessions.setAttribute("aria-expanded", "false");
      ui.toggleSessions.focus();
    }
  });
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
