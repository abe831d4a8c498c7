// The assistant's Markdown as DOM nodes, built safely.
//
// marked (marked.esm.js, vendored from Debian's node-marked 4.2.3; marked.LICENSE.txt)
// only *reads* the text: its lexer turns CommonMark + GFM (tables, fenced code,
// strikethrough, autolinks) into tokens. This module builds the nodes from those
// tokens itself, with createElement and text nodes, and never parses a string as
// HTML. So:
// - raw HTML in the text (`<script>`, `<img onerror>`, HTML in a table cell) is
//   shown as the text it is: there is no path by which it becomes markup;
// - a link is a link only when its URL parses with http:, https: or mailto:, and it
//   opens in a new tab with rel="noopener noreferrer"; any other link (javascript:,
//   data:, a relative path) is its text alone;
// - an image is never loaded (the CSP would refuse a remote one anyway, and a local
//   URL could be any of the box's own routes): it reads as its alt text, linked to
//   its URL when that is http(s);
// - only known token types become elements, from a fixed list; anything else is
//   its raw text.

import { Lexer, getDefaults } from "./marked.esm.js";

// Longer than this, the text is shown as plain text: a renderer's cost grows with its
// input, and no reply worth reading as Markdown is this long.
const MARKDOWN_MAX_CHARS = 200_000;

const LINK_PROTOCOLS = new Set(["http:", "https:", "mailto:"]);

// marked hands text over HTML-escaped (its own renderer writes HTML): undo that,
// and the character references CommonMark decodes, for text nodes.
const NAMED_REFERENCES = {
  amp: "&",
  lt: "<",
  gt: ">",
  quot: '"',
  apos: "'",
  nbsp: "\u00a0",
  copy: "©",
  reg: "®",
  trade: "™",
  hellip: "…",
  mdash: "—",
  ndash: "–",
};

function unescape(text) {
  return String(text ?? "").replace(/&(#\d{1,7}|#[xX][0-9a-fA-F]{1,6}|[a-zA-Z]+);/g, (whole, name) => {
    if (name[0] === "#") {
      const code = name[1] === "x" || name[1] === "X" ? parseInt(name.slice(2), 16) : parseInt(name.slice(1), 10);
      return code > 0 && code <= 0x10ffff && !(code >= 0xd800 && code <= 0xdfff) ? String.fromCodePoint(code) : "\ufffd";
    }
    return NAMED_REFERENCES[name] ?? whole;
  });
}

/** The URL to link to, or null: only http, https and mailto, parsed, never relative. */
export function safeLinkUrl(href) {
  let url;
  try {
    url = new URL(String(href ?? "").trim());
  } catch {
    return null;
  }
  return LINK_PROTOCOLS.has(url.protocol) ? url.href : null;
}

function element(tag, className) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  return node;
}

function link(href, title, children) {
  // An autolink's address comes escaped like its text.
  const url = safeLinkUrl(unescape(href));
  if (url === null) {
    const span = element("span", "md-unlinked");
    span.append(...children);
    return span;
  }
  const anchor = element("a");
  anchor.href = url;
  anchor.target = "_blank";
  anchor.rel = "noopener noreferrer";
  if (title) anchor.title = unescape(title);
  anchor.append(...children);
  return anchor;
}

function inline(tokens) {
  const nodes = [];
  for (const token of tokens ?? []) nodes.push(inlineNode(token));
  return nodes;
}

function inlineNode(token) {
  switch (token.type) {
    case "text":
      // A block-level text (a tight list item's) carries inline tokens of its own.
      return token.tokens ? fragment(inline(token.tokens)) : document.createTextNode(unescape(token.text));
    case "escape":
      return document.createTextNode(unescape(token.text));
    case "html":
      // Raw HTML is shown as what it is: text.
      return document.createTextNode(token.raw ?? token.text ?? "");
    case "strong":
    case "em":
    case "del": {
      const node = element(token.type === "del" ? "del" : token.type);
      node.append(...inline(token.tokens));
      return node;
    }
    case "codespan": {
      const node = element("code");
      node.textContent = unescape(token.text);
      return node;
    }
    case "br":
      return element("br");
    case "link":
      return link(token.href, token.title, inline(token.tokens));
    case "image": {
      const alt = unescape(token.text) || "image";
      const label = document.createTextNode(`[image: ${alt}]`);
      const url = safeLinkUrl(token.href);
      return url !== null && !url.startsWith("mailto:") ? link(url, token.title, [label]) : label;
    }
    default:
      return document.createTextNode(token.raw ?? "");
  }
}

function fragment(nodes) {
  const holder = document.createDocumentFragment();
  holder.append(...nodes);
  return holder;
}

/** A fenced or indented code block, with a button that copies it. */
export function codeBlock(code, language = "") {
  const block = element("div", "code-block");
  const bar = element("div", "code-bar");
  const name = element("span", "code-language");
  name.textContent = language;
  const copy = element("button", "copy");
  copy.type = "button";
  copy.textContent = "Copy";
  copy.setAttribute("aria-label", language ? `Copy ${language} code` : "Copy code");
  copy.addEventListener("click", () => copyText(code, copy));
  bar.append(name, copy);
  const pre = element("pre");
  // Focusable: a long line scrolls sideways, and a keyboard must be able to scroll it.
  pre.tabIndex = 0;
  const text = element("code");
  text.textContent = code;
  pre.append(text);
  block.append(bar, pre);
  return block;
}

async function copyText(text, button) {
  let copied = false;
  try {
    await navigator.clipboard.writeText(text);
    copied = true;
  } catch {
    copied = false;
  }
  button.textContent = copied ? "Copied" : "Copy failed";
  button.dispatchEvent(new CustomEvent("bbx-announce", { bubbles: true, detail: copied ? "Code copied" : "Could not copy the code" }));
  setTimeout(() => (button.textContent = "Copy"), 2000);
}

function table(token) {
  const wrap = element("div", "table-wrap");
  // Focusable, for the same reason as a code block: a wide table scrolls.
  wrap.tabIndex = 0;
  wrap.setAttribute("role", "group");
  wrap.setAttribute("aria-label", "Table");
  const node = element("table");
  const cell = (tag, data, column) => {
    const item = element(tag);
    const align = token.align?.[column];
    if (align) item.className = `align-${align}`;
    if (tag === "th") item.scope = "col";
    item.append(...inline(data.tokens));
    return item;
  };
  const head = element("thead");
  const headRow = element("tr");
  token.header.forEach((data, column) => headRow.append(cell("th", data, column)));
  head.append(headRow);
  node.append(head);
  if (token.rows.length > 0) {
    const body = element("tbody");
    for (const row of token.rows) {
      const line = element("tr");
      row.forEach((data, column) => line.append(cell("td", data, column)));
      body.append(line);
    }
    node.append(body);
  }
  wrap.append(node);
  return wrap;
}

function list(token) {
  const node = element(token.ordered ? "ol" : "ul");
  if (token.ordered && token.start !== "" && Number(token.start) !== 1) node.start = Number(token.start);
  for (const item of token.items) {
    const entry = element("li");
    if (item.task) {
      entry.className = "task";
      const box = element("span", "task-box");
      box.textContent = item.checked ? "☑ " : "☐ ";
      box.setAttribute("aria-hidden", "true");
      const said = element("span", "visually-hidden");
      said.textContent = item.checked ? "Done: " : "To do: ";
      entry.append(box, said);
    }
    entry.append(...blocks(item.tokens));
    node.append(entry);
  }
  return node;
}

function blocks(tokens) {
  const nodes = [];
  for (const token of tokens ?? []) {
    const node = blockNode(token);
    if (node !== null) nodes.push(node);
  }
  return nodes;
}

function blockNode(token) {
  switch (token.type) {
    case "space":
    case "def":
      return null;
    case "paragraph": {
      const node = element("p");
      node.append(...inline(token.tokens));
      return node;
    }
    case "text":
      return inlineNode(token);
    case "heading": {
      // The page's own headings are h1 and h2: a message's start at h3.
      const node = element(`h${Math.min(token.depth + 2, 6)}`);
      node.append(...inline(token.tokens));
      return node;
    }
    case "code":
      return codeBlock(token.text ?? "", token.codeBlockStyle === "indented" ? "" : (token.lang ?? "").split(/\s/, 1)[0]);
    case "blockquote": {
      const node = element("blockquote");
      node.append(...blocks(token.tokens));
      return node;
    }
    case "list":
      return list(token);
    case "table":
      return table(token);
    case "hr":
      return element("hr");
    case "html": {
      // A block of raw HTML: shown as its text, as written.
      const node = element("p", "md-raw");
      node.textContent = token.raw ?? token.text ?? "";
      return node;
    }
    default: {
      const node = element("p", "md-raw");
      node.textContent = token.raw ?? "";
      return node;
    }
  }
}

function lexerOptions() {
  // Fresh each time: marked keeps its tokenizer on the options object.
  return { ...getDefaults(), gfm: true, breaks: false, pedantic: false, mangle: false, headerIds: false, smartypants: false };
}

/** The tokens of `text`, or null when it is to be shown as plain text. */
function lex(text) {
  if (text.length > MARKDOWN_MAX_CHARS) return null;
  try {
    return Lexer.lex(text, lexerOptions());
  } catch {
    return null;
  }
}

/** `text` rendered as Markdown: a `div.markdown` of safe nodes. */
export function markdownNode(text) {
  const holder = element("div", "markdown");
  const tokens = lex(text);
  if (tokens === null) {
    const plain = element("p", "md-raw");
    plain.textContent = text;
    holder.append(plain);
  } else {
    holder.append(...blocks(tokens));
  }
  return holder;
}
