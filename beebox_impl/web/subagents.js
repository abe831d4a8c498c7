// Which history entries are a sub-agent's, and the call each group belongs under.
//
// The history marks a sub-agent's turn `sidechain: true` (the spec's transcript rule
// 4). Claude Code 2.x writes a sub-agent's turns to a transcript of its own, and the
// call that started it names it (`agentId`, rule 5): the page fetches that history
// when the group is opened. Up to 1.0.x the turns sit in the session's own
// transcript, the sub-agent's first turn being the call's prompt, and they come as
// one run after the call (Claude Code wrote a sub-agent's lines when it finished).
// So, in order: a sidechain user turn whose text is the prompt of a Task or Agent
// call not yet grouped starts that call's group; every other sidechain turn joins
// the group its run began; a run that began no call's group (its call is on a page
// not loaded, or gave no prompt) is a group of its own, shown where it stands. A
// run is sidechain turns one after another: a turn of the conversation ends it.

import { entryText } from "./reconcile.js";

/** The tools whose calls start a sub-agent (Claude Code named it Task, then Agent). */
export const SUB_AGENT_TOOLS = new Set(["Task", "Agent"]);

/** Does this tool call start a sub-agent? */
export function startsSubAgent(block) {
  return block.type === "tool_use" && SUB_AGENT_TOOLS.has(block.toolName);
}

/**
 * The tool use id of the call whose sub-agent said `message`, a live `message`
 * event's SDK message (its `parent_tool_use_id`, as the spec's `sub_agent_call`
 * reads it), or null for a message of the main conversation.
 */
export function subAgentCall(message) {
  const call = message.parent_tool_use_id;
  return typeof call === "string" ? call : null;
}

function promptOf(block) {
  const prompt = block.input?.prompt;
  return typeof prompt === "string" ? prompt.trim() : "";
}

/**
 * Split `entries` (oldest first) into the conversation's own and the sub-agents':
 * `main` the entries shown as messages, `byCall` each Task or Agent call's inline
 * group by tool use id, and `loose` the groups with no call to stand under, each
 * `{after, entries}` where `after` is the uuid of the main entry it follows (null at
 * the start).
 */
export function groupSidechains(entries) {
  const main = [];
  const byCall = new Map();
  const loose = [];
  // Calls whose prompt can still start a group, by prompt (the earliest call first).
  const open = new Map();
  let current = null;
  for (const entry of entries) {
    if (entry.sidechain !== true) {
      main.push(entry);
      current = null;
      for (const block of entry.content ?? []) {
        const prompt = promptOf(block);
        if (startsSubAgent(block) && prompt !== "" && !block.agentId) {
          const waiting = open.get(prompt) ?? [];
          waiting.push(block.toolId);
          open.set(prompt, waiting);
        }
      }
      continue;
    }
    const waiting = entry.type === "user" ? open.get(entryText(entry).trim()) : undefined;
    if (waiting !== undefined && waiting.length > 0) {
      current = [];
      byCall.set(waiting.shift(), current);
    } else if (current === null) {
      current = [];
      loose.push({ after: main.length > 0 ? main[main.length - 1].uuid : null, entries: current });
    }
    current.push(entry);
  }
  return { main, byCall, loose };
}
