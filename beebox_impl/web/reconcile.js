// The page's copy of the one client-side join of a message's two records.
//
// Spec: beebox_spec/reconcile.py (normalize_for_compare, merge_accepted_into_pending,
// reconcile_pending), after `docs/sources.md#facts-2-5` (§2.5). This is the only
// JavaScript copy of these rules; tests/web/test_reconcile_js.py runs every
// conformance/vectors/reconcile vector through it under Node, so it cannot drift from
// the Python spec unnoticed.
//
// A send is answered once the box has *recorded* it (the acceptance record); the
// engine writes the *transcript* later. The page shows its own optimistic copies and
// the box's `pending` entries until the transcript holds their echo:
//
// - mergeAcceptedIntoPending folds the box's accepted entries into the page's pending
//   list, skipping one already pending by uuid or by equal normalized text (used up
//   one for one, so two real sends of "yes" stay two);
// - reconcilePending retires a pending entry once its normalized text appears in one
//   of the newest `pending.length + 5` user entries of the transcript that is not in
//   its baseline (`reconcileKnownUuids`); each match removes the first occurrence of
//   the text from that entry, so one durable "yes" retires one pending "yes".
//
// Entries have the wire shape of history: {uuid, type, timestamp, content: [blocks]}.
// Nothing here touches the DOM or the network: the module is plain functions.

// A failed upload's placeholder (beebox_spec.entries.IMAGE_NOT_DISPLAYED).
export const IMAGE_NOT_DISPLAYED = "[image not displayed]";

// How many user entries beyond the number pending the join looks back through.
export const RECONCILE_LOOKBACK_EXTRA = 5;

// A composer's image token, `[image#1]` or the older `[image1]` (ASCII digits).
const IMAGE_TOKEN_RE = /\[image#?[0-9]+]/g;

// The opening `<typed …>` / `<speech …>` tag, attributes and all (`\b` is ASCII in JS,
// as the spec's pattern is compiled with re.ASCII).
const TYPED_OR_SPEECH_OPENING_TAG = /<(typed|speech)\b[^>]*>/g;

/** The entry's text blocks joined with no separator (the spec's `entry_text`). */
export function entryText(entry) {
  let text = "";
  for (const block of entry.content ?? []) {
    if (block.type === "text") text += block.text ?? "";
  }
  return text;
}

/**
 * A message's text as its three copies (optimistic, accepted, transcript) agree on it:
 * no `[image not displayed]`, no image tokens, bare opening `<typed>`/`<speech>` tags.
 * Nothing is trimmed.
 */
export function normalizeForCompare(text) {
  return text
    .replaceAll(IMAGE_NOT_DISPLAYED, "")
    .replace(IMAGE_TOKEN_RE, "")
    .replace(TYPED_OR_SPEECH_OPENING_TAG, "<$1>");
}

/** The text with its first occurrence of `part` removed (a literal, not a pattern). */
function withoutFirst(text, part) {
  const at = text.indexOf(part);
  return at === -1 ? text : text.slice(0, at) + text.slice(at + part.length);
}

/**
 * The page's pending list with the box's accepted entries folded in, after them.
 * With no accepted entries the list is returned unchanged (as a copy).
 */
export function mergeAcceptedIntoPending(pending, accepted) {
  if (accepted.length === 0) return [...pending];
  const seenUuids = new Set(pending.map((entry) => entry.uuid));
  const unmatchedTexts = pending
    .map((entry) => normalizeForCompare(entryText(entry)))
    .filter((text) => text !== "");
  const kept = [];
  for (const entry of accepted) {
    // The same entry is already pending (or was kept a moment ago).
    if (seenUuids.has(entry.uuid)) continue;
    const text = normalizeForCompare(entryText(entry));
    const match = text === "" ? -1 : unmatchedTexts.indexOf(text);
    // A pending copy already carries this text: use that copy up, keep it alone.
    if (match !== -1) {
      unmatchedTexts.splice(match, 1);
      continue;
    }
    seenUuids.add(entry.uuid);
    kept.push(entry);
  }
  return [...pending, ...kept];
}

/**
 * Retire the pending entries the transcript has caught up with.
 * Returns {messages: server entries then those still pending, pendingMessages}.
 */
export function reconcilePending(serverMessages, pendingMessages) {
  if (pendingMessages.length === 0) {
    return { messages: [...serverMessages], pendingMessages: [] };
  }

  const lookback = pendingMessages.length + RECONCILE_LOOKBACK_EXTRA;
  const candidates = [];
  for (let index = serverMessages.length - 1; index >= 0; index -= 1) {
    // Enough user entries collected: older ones cannot be an echo.
    if (candidates.length >= lookback) break;
    const entry = serverMessages[index];
    // Only a user entry can echo a user's message.
    if (entry.type === "user") {
      candidates.push({ uuid: entry.uuid, remainingText: normalizeForCompare(entryText(entry)) });
    }
  }
  candidates.reverse();

  const stillPending = [];
  for (const pending of pendingMessages) {
    const pendingText = normalizeForCompare(entryText(pending));
    // Nothing left to compare: the entry is dropped, neither shown nor kept.
    if (pendingText === "") continue;
    const baseline = new Set(pending.reconcileKnownUuids ?? []);
    const echo = candidates.find(
      // Not an entry that existed before this message, and it holds the text.
      (candidate) => !baseline.has(candidate.uuid) && candidate.remainingText.includes(pendingText),
    );
    if (echo === undefined) {
      stillPending.push(pending);
      continue;
    }
    // One durable occurrence retires one pending message.
    echo.remainingText = withoutFirst(echo.remainingText, pendingText);
  }

  return { messages: [...serverMessages, ...stillPending], pendingMessages: stillPending };
}
