// Markdown to DOM nodes, safely: the text is never parsed as HTML. Every piece of
// a message becomes a text node or an element made here with createElement, so
// "<script>", "<img onerror=…>" and entities stay visible text.
//
// What is rendered: paragraphs (line breaks kept), fenced code blocks (```),
// indented-by-nothing lists (-, *, + and 1.), block quotes (>), headings (#…),
// and inline: `code`, **strong**, *em* / _em_, ~~strike~~, [links](url),
// <autolinks> and bare http(s) URLs. A link is made only for http:, https: and
// mailto: URLs and the page's own permalinks (#/m/ID, #/t/ID); anything else
// (javascript:, data:, vbscript:, file:, entity tricks) stays plain text.

import { h } from "./util.js";

const MAX_DEPTH = 8;            // nested emphasis deeper than this is left as text
const MAX_LABEL = 500;          // a link's text and URL are at most this long (a bound on the search)
const MAX_URL = 2000;
export const MAX_MARKDOWN = 20000;  // longer bodies are shown as plain text
const SAFE_URL = /^(https?:\/\/[^\s<>"]+|mailto:[^\s<>"]+|#\/[mt]\/[A-Za-z0-9_-]+)$/i;

/** A safe href for ``url``, or null. */
export function safeHref(url) {
  const u = String(url || "").trim();
  if (!SAFE_URL.test(u)) return null;
  return u;
}

/** A fragment with the rendered Markdown of ``text`` (plain text when it is very long). */
export function renderMarkdown(text) {
  const frag = document.createDocumentFragment();
  if (String(text || "").length > MAX_MARKDOWN) {
    frag.append(h("p", { class: "md-plain" }, String(text)));
    return frag;
  }
  const lines = String(text || "").replace(/\r\n?/g, "\n").split("\n");
  let i = 0;
  let para = [];
  const flush = () => {
    if (para.length) frag.append(h("p", {}, inlineLines(para)));
    para = [];
  };
  while (i < lines.length) {
    const line = lines[i];
    const fence = line.match(/^\s{0,3}(```+|~~~+)\s*([\w+-]*)\s*$/);
    if (fence) {
      flush();
      const close = fence[1];
      const body = [];
      i += 1;
      while (i < lines.length && !lines[i].trim().startsWith(close)) body.push(lines[i++]);
      i += 1;                                   // the closing fence (or the end)
      const code = h("code", {}, body.join("\n"));
      if (fence[2]) code.dataset.lang = fence[2];
      frag.append(h("pre", {}, code));
      continue;
    }
    if (!line.trim()) {
      flush();
      i += 1;
      continue;
    }
    const heading = line.match(/^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/);
    if (heading) {
      flush();
      frag.append(h("p", { class: `md-h md-h${heading[1].length}` }, inline(heading[2], 0)));
      i += 1;
      continue;
    }
    if (/^\s{0,3}>/.test(line)) {
      flush();
      const quoted = [];
      while (i < lines.length && /^\s{0,3}>/.test(lines[i])) quoted.push(lines[i++].replace(/^\s{0,3}>\s?/, ""));
      frag.append(h("blockquote", {}, inlineLines(quoted)));
      continue;
    }
    const item = listItem(line);
    if (item) {
      flush();
      const list = h(item.ordered ? "ol" : "ul", {});
      if (item.ordered && item.start !== 1) list.setAttribute("start", String(item.start));
      while (i < lines.length) {
        const next = listItem(lines[i]);
        if (next && next.ordered === item.ordered) {
          list.append(h("li", {}, inline(next.text, 0)));
          i += 1;
        } else if (lines[i].trim() && /^\s{2,}/.test(lines[i]) && list.lastChild) {
          list.lastChild.append(h("br"), inline(lines[i].trim(), 0));   // a continued item
          i += 1;
        } else {
          break;
        }
      }
      frag.append(list);
      continue;
    }
    para.push(line);
    i += 1;
  }
  flush();
  return frag;
}

function listItem(line) {
  let m = line.match(/^\s{0,3}[-*+]\s+(.*)$/);
  if (m) return { ordered: false, text: m[1] };
  m = line.match(/^\s{0,3}(\d{1,9})[.)]\s+(.*)$/);
  if (m) return { ordered: true, start: Number(m[1]), text: m[2] };
  return null;
}

function inlineLines(lines) {
  const out = [];
  lines.forEach((line, k) => {
    if (k) out.push(h("br"));
    out.push(...inline(line, 0));
  });
  return out;
}

// Inline spans, left to right: the earliest opener wins; code spans first of all
// (their content is literal).
const OPENERS = [
  { re: /`+/y, kind: "code" },
  { re: /\*\*|__/y, kind: "strong" },
  { re: /~~/y, kind: "del" },
  { re: /\*|_/y, kind: "em" },
  { re: /\[/y, kind: "link" },
  { re: /<(?=(https?:|mailto:))/iy, kind: "autolink" },
  { re: /https?:\/\//iy, kind: "url" },
];

/** Nodes for one line of inline Markdown. */
export function inline(text, depth) {
  const out = [];
  let plain = "";
  let i = 0;
  const push = (node) => {
    if (plain) out.push(document.createTextNode(plain));
    plain = "";
    out.push(node);
  };
  const failed = new Set();      // openers that found no closer: none will further on (no O(n²))
  while (i < text.length) {
    const span = depth < MAX_DEPTH ? spanAt(text, i, depth, failed) : null;
    if (span) {
      push(span.node);
      i = span.end;
    } else {
      plain += text[i];
      i += 1;
    }
  }
  if (plain) out.push(document.createTextNode(plain));
  return out;
}

function spanAt(text, i, depth, failed) {
  const ch = text[i];
  if (!"`*_~[<hH".includes(ch)) return null;
  for (const { re, kind } of OPENERS) {
    re.lastIndex = i;
    const m = re.exec(text);
    if (!m) continue;
    const tag = kind + m[0];
    if (failed.has(tag)) continue;
    const span = SPANS[kind](text, i, m[0], depth);
    if (span === NONE) failed.add(tag);
    else if (span) return span;
  }
  return null;
}

const NONE = Object.freeze({});   // a span's answer: no closer anywhere further on (not just here)

const SPANS = {
  code(text, i, ticks) {
    const end = text.indexOf(ticks, i + ticks.length);
    if (end < 0) return NONE;
    let body = text.slice(i + ticks.length, end);
    if (body.length > 2 && body.startsWith(" ") && body.endsWith(" ")) body = body.slice(1, -1);
    return { node: h("code", {}, body), end: end + ticks.length };
  },
  strong: (text, i, mark, depth) => delimited(text, i, mark, depth, "strong"),
  del: (text, i, mark, depth) => delimited(text, i, mark, depth, "del"),
  em(text, i, mark, depth) {
    // "_" inside a word (snake_case) is not emphasis
    if (mark === "_" && i > 0 && /\w/.test(text[i - 1])) return null;
    return delimited(text, i, mark, depth, "em");
  },
  link(text, i, _mark, depth) {
    if (text.indexOf("]", i) < 0) return NONE;
    const close = matching(text, i, "[", "]", MAX_LABEL);
    if (close < 0 || text[close + 1] !== "(") return null;
    const end = matching(text, close + 1, "(", ")", MAX_URL);
    if (end < 0) return null;
    const label = text.slice(i + 1, close);
    const url = text.slice(close + 2, end).trim().replace(/\s+"[^"]*"$/, "");
    const href = safeHref(url);
    if (!href) return null;                       // unsafe: the whole thing stays text
    return { node: anchor(href, inline(label, depth + 1)), end: end + 1 };
  },
  autolink(text, i) {
    const end = text.indexOf(">", i);
    if (end < 0) return null;
    const href = safeHref(text.slice(i + 1, end));
    if (!href) return null;
    return { node: anchor(href, [href]), end: end + 1 };
  },
  url(text, i) {
    if (i > 0 && /[\w/]/.test(text[i - 1])) return null;
    let end = i;
    while (end < text.length && !/[\s<>"]/.test(text[end])) end += 1;
    // trailing punctuation is the sentence's, and so is a ")" that opens nowhere in the URL
    while (end > i && /[.,;:!?)\]'*_~]/.test(text[end - 1])) {
      const url = text.slice(i, end);
      if (url.endsWith(")") && url.split("(").length >= url.split(")").length) break;
      end -= 1;
    }
    const href = safeHref(text.slice(i, end));
    if (!href || end - i <= 8) return null;
    return { node: anchor(href, [href]), end };
  },
};

// Emphasis by runs of the mark: a run closes when it follows a non-space and is as
// long as the opener, or three long (the inner emphasis closes with it:
// ***a***, *a **b***). "_" never opens or closes inside a word (snake_case).
function delimited(text, i, mark, depth, tag) {
  const c = mark[0];
  const n = mark.length;
  const start = i + n;
  if (start >= text.length || /\s/.test(text[start])) return null;
  let j = start;
  while (j < text.length) {
    if (text[j] === "`") {                        // a code span inside is skipped whole
      const t = text.slice(j).match(/^`+/)[0];
      const e = text.indexOf(t, j + t.length);
      j = e >= 0 ? e + t.length : j + t.length;
      continue;
    }
    if (text[j] !== c) {
      j += 1;
      continue;
    }
    let end = j;
    while (end < text.length && text[end] === c) end += 1;
    const run = end - j;
    const fits = run === n || run === 3 || (n === 2 && run > 2);
    const wordAfter = c === "_" && end < text.length && /\w/.test(text[end]);
    if (fits && j > start && !/\s/.test(text[j - 1]) && !wordAfter) {
      const at = end - n;
      return { node: h(tag, {}, inline(text.slice(start, at), depth + 1)), end };
    }
    j = end;
  }
  return NONE;
}

function matching(text, i, open, close, within) {
  let level = 0;
  for (let k = i; k < Math.min(text.length, i + within); k += 1) {
    if (text[k] === "\\") { k += 1; continue; }
    if (text[k] === open) level += 1;
    else if (text[k] === close) {
      level -= 1;
      if (level === 0) return k;
    }
  }
  return -1;
}

function anchor(href, children) {
  const internal = href.startsWith("#");
  return h("a", internal ? { href } : { href, target: "_blank", rel: "noopener noreferrer" }, children);
}
