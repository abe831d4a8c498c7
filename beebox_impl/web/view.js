// Turning history entries into DOM nodes. Text is only ever set as text (never as
// HTML): a transcript is data, and the page's CSP forbids inline script besides.

import { mediaUrl } from "./api.js";
import { markdownNode } from "./markdown.js";
import { IMAGE_NOT_DISPLAYED, entryText } from "./reconcile.js";

// What a pending message's state reads as, beside it.
const STATE_LABELS = {
  sending: "Sending…",
  sent: "Sent",
  queued: "Queued",
  failed: "Not sent — retrying",
  error: "Recorded, but the chat could not take it",
  rejected: "Refused",
  accepted: "Waiting for the transcript",
  dropped: "Not sent: Stop cleared the queue",
};

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function blobUrlFromBase64(mediaType, base64) {
  const bytes = Uint8Array.from(atob(base64), (character) => character.charCodeAt(0));
  return URL.createObjectURL(new Blob([bytes], { type: mediaType || "application/octet-stream" }));
}

// The sizes of the photos this browser has shown, by ref, so a photo shown again takes
// its place before its bytes come (the history carries no sizes). Newest last.
const PHOTO_SIZES_KEY = "beebox.photoSizes.v1";
const PHOTO_SIZES_KEPT = 500;

function readPhotoSizes() {
  try {
    return new Map(JSON.parse(localStorage.getItem(PHOTO_SIZES_KEY) ?? "[]"));
  } catch {
    return new Map();
  }
}

const photoSizes = readPhotoSizes();

function rememberPhotoSize(key, width, height) {
  const known = photoSizes.get(key);
  if (known !== undefined && known[0] === width && known[1] === height) return;
  photoSizes.delete(key);
  photoSizes.set(key, [width, height]);
  if (photoSizes.size > PHOTO_SIZES_KEPT) photoSizes.delete(photoSizes.keys().next().value);
  try {
    localStorage.setItem(PHOTO_SIZES_KEY, JSON.stringify([...photoSizes]));
  } catch {
    // Storage refused: the page keeps the view at the bottom all the same.
  }
}

/** Give a photo of known size the box it will have once loaded: the style sheet's fit
 * (at most its own size, the message's width and 24rem tall), as lengths. */
function reservePhotoSize(image, [width, height]) {
  image.style.aspectRatio = `${width} / ${height}`;
  image.style.width = `min(${width}px, calc(24rem * ${width} / ${height}))`;
}

function photo(src, alt, sizeKey = null) {
  const image = element("img", "photo");
  // Lazy: scrolling back through an old conversation fetches one photo at a time,
  // and never the ones nobody scrolls to.
  image.loading = "lazy";
  image.decoding = "async";
  image.alt = alt;
  if (sizeKey !== null) {
    const known = photoSizes.get(sizeKey);
    if (known !== undefined) reservePhotoSize(image, known);
    image.addEventListener("load", () => rememberPhotoSize(sizeKey, image.naturalWidth, image.naturalHeight));
  }
  image.src = src;
  return image;
}

// A text block, with each `[image not displayed]` (a failed upload) set apart.
function textBlock(text) {
  const paragraph = element("p", "block-text");
  const parts = text.split(IMAGE_NOT_DISPLAYED);
  parts.forEach((part, index) => {
    if (index > 0) paragraph.append(element("span", "block-missing", IMAGE_NOT_DISPLAYED));
    if (part !== "") paragraph.append(part);
  });
  return paragraph;
}

function imageBlock(block, alt) {
  if (block.imageRef) return photo(mediaUrl(block.imageRef), alt, block.imageRef);
  if (block.dataBase64) return photo(blobUrlFromBase64(block.mediaType, block.dataBase64), alt);
  if (block.imageUrl) return element("p", "block-missing", `[photo at ${block.imageUrl}]`);
  return element("p", "block-missing", IMAGE_NOT_DISPLAYED);
}

// What a person wants to see of a tool call at a glance: the command, the file, the
// pattern, the address, the question; else the history's one-line summary.
function toolArgument(block) {
  const input = block.input ?? {};
  const text = (key) => (typeof input[key] === "string" && input[key] !== "" ? input[key] : null);
  switch (block.toolName) {
    case "Bash":
      return text("command");
    case "Read":
    case "Write":
    case "Edit":
    case "MultiEdit":
      return text("file_path");
    case "NotebookEdit":
      return text("notebook_path");
    case "Glob":
    case "Grep": {
      const pattern = text("pattern");
      const where = text("path");
      return pattern !== null && where !== null ? `${pattern} in ${where}` : pattern;
    }
    case "WebFetch":
      return text("url");
    case "WebSearch":
      return text("query");
    case "Task":
    case "Agent":
      return text("description") ?? text("prompt");
    default:
      break;
  }
  for (const key of ["command", "file_path", "path", "pattern", "url", "query", "description"]) {
    if (text(key) !== null) return text(key);
  }
  return block.inputSummary || null;
}

// The whole input, one click away: a Bash command as written, anything else as JSON.
function toolInput(block) {
  const input = block.input ?? {};
  if (block.toolName === "Bash" && typeof input.command === "string") {
    const rest = Object.fromEntries(Object.entries(input).filter(([key]) => key !== "command"));
    return Object.keys(rest).length === 0 ? input.command : `${input.command}\n\n${JSON.stringify(rest, null, 2)}`;
  }
  if (Object.keys(input).length === 0) return block.inputSummary ?? "";
  return JSON.stringify(input, null, 2);
}

// What a tool call's outcome reads as, in its summary line.
const TOOL_OUTCOMES = { error: "Failed", refused: "Refused", pending: "No result yet" };

function labelled(label, className, text) {
  const part = element("div", "tool-part");
  part.append(element("p", "tool-label", label));
  const shown = element("pre", className, text);
  // Focusable: a long input or result scrolls, and a keyboard must be able to scroll it.
  shown.tabIndex = 0;
  part.append(shown);
  return part;
}

/**
 * A tool call: its name and main argument in a summary line, its outcome marked there
 * (failed, refused by the person, or not answered yet); the full input and the result
 * (the transcript's result rides on its call) folded below it.
 */
function toolUseBlock(block, refused) {
  let outcome = "done";
  if (block.resultSummary === undefined) outcome = "pending";
  else if (block.isError === true) outcome = refused ? "refused" : "error";
  const details = element("details", "tool");
  details.dataset.outcome = outcome;
  const summary = element("summary");
  summary.append(element("span", "tool-name", block.toolName || "Tool"));
  const argument = toolArgument(block);
  if (argument) summary.append(" ", element("code", "tool-arg", argument));
  if (TOOL_OUTCOMES[outcome]) summary.append(" ", element("span", "tool-outcome", TOOL_OUTCOMES[outcome]));
  details.append(summary);
  const body = element("div", "tool-body");
  body.append(labelled("Input", "tool-input", toolInput(block)));
  if (block.resultSummary !== undefined) {
    const label = { error: "Error", refused: "Refused" }[outcome] ?? "Result";
    body.append(labelled(label, "tool-result", block.resultSummary || "(empty)"));
  }
  details.append(body);
  return details;
}

function foldedBlock(className, label, text) {
  const details = element("details", className);
  details.append(element("summary", "", label));
  details.append(element("p", "block-text", text));
  return details;
}

function contentBlock(block, context) {
  switch (block.type) {
    case "text":
      // The agent writes Markdown; a person's own words stay exactly as typed.
      return context.markdown ? markdownNode(block.text ?? "") : textBlock(block.text ?? "");
    case "image":
      return imageBlock(block, context.photoAlt());
    case "tool_use":
      return toolUseBlock(block, context.refused(block));
    case "tool_result":
      return foldedBlock("tool", "Tool result", block.resultSummary ?? "");
    case "thinking":
      return foldedBlock("thinking", "Thinking", block.text ?? "");
    default:
      return element("p", "block-missing", `[${block.type}]`);
  }
}

function clockTime(timestamp) {
  const moment = new Date(timestamp);
  if (Number.isNaN(moment.getTime())) return "";
  return moment.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
}

// How much of a message's text a photo's alt text quotes.
const ALT_CAPTION_CHARS = 80;

/** What a photo of `entry` says to someone who cannot see it: whose, when, which of
 * how many, and the words sent with it. */
function photoAltText(entry, speaker, index, count) {
  const time = clockTime(entry.timestamp);
  const which = count > 1 ? `Photo ${index} of ${count}` : "Photo";
  const whose = entry.type === "user" ? `sent by ${speaker}` : "shown by the box";
  let alt = `${which} ${whose}${time ? ` at ${time}` : ""}`;
  const words = entryText(entry).replaceAll(IMAGE_NOT_DISPLAYED, "").replace(/\s+/g, " ").trim();
  if (words !== "") {
    const quoted = words.length > ALT_CAPTION_CHARS ? `${words.slice(0, ALT_CAPTION_CHARS - 1)}…` : words;
    alt = `${alt}, with the message “${quoted}”`;
  }
  return alt;
}

/** Who an entry is: the person, the box, or a sub-agent and the prompt it was given. */
function speakerOf(entry) {
  if (entry.sidechain === true) return entry.type === "user" ? "Sub-agent's task" : "Sub-agent";
  return entry.type === "user" ? entry.user ?? "You" : "Box";
}

/**
 * A history entry (or a pending one: `state`, `previews`, `onRetry`) as a list item.
 * `refused(block)` says whether a failed tool call was refused by a person;
 * `subAgent(block)` gives the node of the sub-agent work a Task or Agent call
 * started, shown under the call (null when there is none to show).
 */
export function messageNode(
  entry,
  { state = null, previews = [], onRetry = null, refused = () => false, subAgent = () => null } = {},
) {
  const item = element("li", `message ${entry.type}`);
  item.dataset.uuid = entry.uuid;
  if (entry.sidechain === true) item.classList.add("sidechain");
  if (state !== null) {
    item.dataset.state = state;
    item.classList.add("pending");
  }
  const speaker = speakerOf(entry);
  item.setAttribute("aria-label", `${speaker}, ${clockTime(entry.timestamp)}`);
  const content = entry.content ?? [];
  const photoCount = content.filter((block) => block.type === "image").length + previews.length;
  let photoIndex = 0;
  const context = {
    // The agent writes Markdown, and so does it in a sub-agent's task.
    markdown: entry.type === "assistant" || entry.sidechain === true,
    photoAlt: () => photoAltText(entry, speaker, ++photoIndex, photoCount),
    refused,
  };
  for (const block of content) {
    item.append(contentBlock(block, context));
    const work = block.type === "tool_use" ? subAgent(block) : null;
    if (work !== null) item.append(work);
  }
  // The photos of a message not yet in the transcript: the composer's own copies.
  for (const preview of previews) item.append(photo(preview, `${context.photoAlt()} (sending)`));
  const meta = element("div", "meta");
  meta.append(element("time", "", clockTime(entry.timestamp)));
  if (state !== null) {
    meta.append(element("span", "badge", stateLabel(state)));
    if (onRetry !== null) {
      const retry = element("button", "retry", "Retry now");
      retry.type = "button";
      retry.addEventListener("click", onRetry);
      meta.append(retry);
    }
  }
  item.append(meta);
  return item;
}

/**
 * A sub-agent's work, folded under the call that started it: "Sub-agent: <what it
 * was asked> · N steps", its turns listed below once opened. `onOpen` runs each time
 * it is opened (a group fetched on demand loads then); `show(entries, {total,
 * more})` fills it, `more` (when given) being a "Show more" action for what is not
 * loaded yet; `fail(message)` says why it could not be read.
 */
export function subAgentNode(description, { onOpen = null, build = (entry) => messageNode(entry) } = {}) {
  const details = element("details", "subagent");
  const summary = element("summary");
  const label = element("span", "subagent-label", `Sub-agent: ${description || "work"}`);
  const steps = element("span", "subagent-steps");
  summary.append(label, steps);
  const log = element("ol", "subagent-log");
  log.setAttribute("aria-label", `Sub-agent: ${description || "work"}`);
  const note = element("p", "subagent-note");
  note.hidden = true;
  details.append(summary, log, note);
  if (onOpen !== null) details.addEventListener("toggle", () => details.open && onOpen());
  let moreButton = null;
  return {
    node: details,
    show(entries, { total = entries.length, more = null } = {}) {
      steps.textContent = ` · ${total} ${total === 1 ? "step" : "steps"}`;
      log.replaceChildren(...entries.map(build));
      note.hidden = true;
      // A keyboard on "Show more" stays there, or on the fold once all is shown.
      const hadFocus = moreButton !== null && moreButton === document.activeElement;
      moreButton?.remove();
      moreButton = null;
      if (more !== null) {
        moreButton = element("button", "subagent-more quiet", `Show more (${total - entries.length} left)`);
        moreButton.type = "button";
        moreButton.addEventListener("click", more);
        details.append(moreButton);
      }
      if (hadFocus) (moreButton ?? summary).focus();
    },
    loading() {
      details.setAttribute("aria-busy", "true");
    },
    loaded() {
      details.removeAttribute("aria-busy");
    },
    fail(message) {
      note.textContent = message;
      note.hidden = false;
    },
  };
}

/** What a pending message's state reads as (for the page's announcements too). */
export function stateLabel(state) {
  return STATE_LABELS[state] ?? state;
}

/** The assistant's text as it streams in, before the transcript has it: Markdown,
 * rendered again as each piece comes. */
export function liveNode(key, text) {
  const item = element("li", "message assistant live");
  item.dataset.live = key;
  item.setAttribute("aria-label", "Box, answering");
  item.append(markdownNode(text));
  return item;
}

/** One session of the list: its husk title and what it contains. */
export function sessionNode(session, { current, onOpen }) {
  const item = element("li");
  const button = element("button");
  button.type = "button";
  button.setAttribute("aria-current", current ? "true" : "false");
  button.append(element("span", "title", session.title ?? `Session ${session.sessionId.slice(0, 8)}`));
  if (session.contains) button.append(element("span", "contains", session.contains));
  button.addEventListener("click", onOpen);
  item.append(button);
  return item;
}

// What a tool call would do, as plain text: a command, a file, else compact JSON.
function permissionInput(input) {
  if (typeof input?.command === "string") return input.command;
  if (typeof input?.file_path === "string") return input.file_path;
  return JSON.stringify(input ?? {});
}

function actionButton(className, label, onClick) {
  const button = element("button", className, label);
  button.type = "button";
  button.addEventListener("click", onClick);
  return button;
}

/**
 * A pending permission request as a card: what the agent wants to do, and Allow,
 * Always allow (only where the request offers it) and Deny with an optional reason.
 * `onAnswer(decision, {message, always})` runs on a click; the card is built once and
 * `setPermissionState` updates it, so a half-typed reason and the focus survive.
 */
export function permissionNode(request, onAnswer) {
  const item = element("li", "permission");
  item.dataset.id = request.id;
  const toolName = request.toolName ?? "a tool";
  // The CLI's own sentence ("Claude wants to run …") where it gave one, else the tool.
  const headingText = request.title ?? request.displayName ?? toolName;
  const heading = element("h3", "permission-title", headingText);
  heading.id = `${request.id}-title`;
  item.setAttribute("aria-labelledby", heading.id);
  const kind = headingText === toolName ? "Permission needed" : `Permission needed · ${toolName}`;
  item.append(element("p", "permission-kind", kind), heading);
  const input = request.input ?? {};
  const about = request.description ?? (typeof input.description === "string" ? input.description : "");
  if (about) item.append(element("p", "permission-about", about));
  const shown = element("pre", "permission-input", permissionInput(input));
  // Focusable: a long input scrolls, and a keyboard must be able to scroll it.
  shown.tabIndex = 0;
  shown.setAttribute("aria-label", `${toolName} input`);
  item.append(shown);
  if (request.blockedPath) item.append(element("p", "permission-detail", `Blocked path: ${request.blockedPath}`));
  if (request.decisionReason) item.append(element("p", "permission-detail", `Why it asks: ${request.decisionReason}`));

  const reasonId = `${request.id}-reason`;
  const label = element("label", "visually-hidden", "Reason for denying (optional, the agent sees it)");
  label.htmlFor = reasonId;
  const reason = element("input", "permission-reason");
  reason.type = "text";
  reason.id = reasonId;
  reason.maxLength = 2000;
  reason.placeholder = "Reason (optional, sent with Deny)";
  const deny = () => onAnswer("deny", { message: reason.value.trim() });
  reason.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.isComposing) {
      event.preventDefault();
      if (!reason.disabled) deny();
    }
  });

  const actions = element("div", "permission-actions");
  actions.append(actionButton("allow", "Allow", () => onAnswer("allow", {})));
  if (request.canAlwaysAllow === true) {
    actions.append(actionButton("always", "Always allow", () => onAnswer("allow", { always: true })));
  }
  actions.append(actionButton("deny", "Deny", deny));
  const error = element("p", "permission-error");
  error.setAttribute("role", "alert");
  error.hidden = true;
  item.append(label, reason, actions, error);
  return item;
}

/** A card's answer in flight (controls disabled) and the error of the last try, if any. */
export function setPermissionState(item, { busy, error }) {
  for (const control of item.querySelectorAll("button, input")) control.disabled = busy;
  item.setAttribute("aria-busy", busy ? "true" : "false");
  const note = item.querySelector(".permission-error");
  note.textContent = error ?? "";
  note.hidden = !error;
}
