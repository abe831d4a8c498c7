// The page's view of the box's HTTP API (docs/http.md). Every request carries the
// HttpOnly cookie the login URL set: the page never sees the token itself.

/** An answer that was not a 2xx: its status and the box's `{error}` message. */
export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

// Told of every 401: without the cookie nothing of the API works (`onUnauthorized`).
let unauthorized = () => {};

/** Run `callback` whenever the box answers 401: this browser is not logged in. */
export function onUnauthorized(callback) {
  unauthorized = callback;
}

async function request(method, path, body) {
  const options = { method, credentials: "same-origin", headers: {} };
  if (body !== undefined) {
    options.headers["Content-Type"] = "application/json";
    options.body = JSON.stringify(body);
  }
  const response = await fetch(path, options);
  const text = await response.text();
  let answer = null;
  try {
    answer = text === "" ? null : JSON.parse(text);
  } catch {
    answer = null;
  }
  if (!response.ok) {
    if (response.status === 401) unauthorized();
    throw new ApiError(response.status, answer?.error ?? `HTTP ${response.status}`);
  }
  return answer;
}

function query(params) {
  const given = Object.entries(params).filter(([, value]) => value !== null && value !== undefined);
  return given.length === 0 ? "" : `?${new URLSearchParams(given)}`;
}

/** `chat.bootstrap`: the history tail, the box's pending messages and the chat's status. */
export function bootstrap({ session = null, tail }) {
  return request("GET", `/api/chat/bootstrap${query({ session, tail })}`);
}

/** A page of a session's history: entries `offset` to `offset + limit`. */
export function historyPage(session, offset, limit) {
  return request("GET", `/api/chat/history${query({ session, offset, limit })}`);
}

/** A page of the history of a session's sub-agent (the `agentId` its call names). */
export function subAgentHistory(session, agent, offset, limit) {
  return request("GET", `/api/chat/history${query({ session, agent, offset, limit })}`);
}

/** Record a message: `{turnId}`, `{queued: true}` or `{deduplicated: true}`. */
export function send(message, messageId, images) {
  const body = { message, messageId };
  if (images.length > 0) body.images = images;
  return request("POST", "/api/chat/send", body);
}

/**
 * Answer a pending permission request: `decision` is "allow" or "deny"; a deny may
 * carry a `message` for the model, an allow may be `always` (only where the request's
 * `canAlwaysAllow`). Answers `{ok, id, decision}`; a 409 means it had ended already.
 */
export function answerPermission(id, decision, { message = "", always = false } = {}) {
  const body = { decision };
  if (decision === "deny" && message !== "") body.message = message;
  if (decision === "allow" && always) body.always = true;
  return request("POST", `/api/chat/permissions/${encodeURIComponent(id)}`, body);
}

/** The box's record of permission requests: `{pending, decisions}`, the last `limit`
 * decisions newest first (each with its `request`, whose `toolUseId` names the call). */
export function permissionRecord(limit) {
  return request("GET", `/api/chat/permissions${query({ limit })}`);
}

export const stop = () => request("POST", "/api/chat/stop");
export const restart = () => request("POST", "/api/chat/restart");

/** The box's chat sessions from their husk cards (title and `contains` once reviewed). */
export function sessions() {
  return request("GET", "/api/chat/sessions");
}

/** The URL of one stripped photo of a transcript. */
export function mediaUrl(ref) {
  // The ref's slashes are part of the route: encode each segment, not the whole.
  return `/api/session-media/${ref.split("/").map(encodeURIComponent).join("/")}`;
}

// The box's event names (docs/http.md, GET /api/events).
const EVENT_NAMES = [
  "chat-user-message",
  "chat-turn",
  "session-id",
  "message",
  "turn-delta",
  "task",
  "done",
  "turn-text",
  "close",
  "start-failed",
  "turn-error",
  "events-lost",
  "permission-request",
  "permission-ended",
];

// Reconnect delays: doubling from half a second, never more than 15 s apart.
const FIRST_RETRY_MS = 500;
const LONGEST_RETRY_MS = 15000;

/**
 * Listen to `/api/events`, reconnecting with backoff whenever the stream drops.
 *
 * EventSource retries on its own only at a fixed pace and gives up on an HTTP error,
 * so each failure closes it and a fresh one is opened after the next delay.
 * `onOpen()` runs on every (re)connection: events sent while the page was away are
 * gone, so the caller re-reads the state then. `onDown(delayMs)` says when the next
 * try is. Returns a function that stops listening.
 */
export function listen({ onEvent, onOpen, onDown }) {
  let source = null;
  let delay = FIRST_RETRY_MS;
  let timer = null;
  let stopped = false;

  function connect() {
    timer = null;
    source = new EventSource("/api/events");
    source.addEventListener("open", () => {
      delay = FIRST_RETRY_MS;
      onOpen();
    });
    for (const name of EVENT_NAMES) {
      source.addEventListener(name, (event) => {
        let data = {};
        try {
          data = JSON.parse(event.data);
        } catch {
          return; // Not JSON: not an event this page knows how to read.
        }
        onEvent(name, data);
      });
    }
    source.addEventListener("error", () => {
      source.close();
      if (stopped) return;
      onDown(delay);
      timer = setTimeout(connect, delay);
      delay = Math.min(delay * 2, LONGEST_RETRY_MS);
    });
  }

  connect();
  return () => {
    stopped = true;
    if (timer !== null) clearTimeout(timer);
    source?.close();
  };
}
