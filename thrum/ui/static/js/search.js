// Search (message.search): results as you type (the newest query wins), each
// with its snippet; a hit opens the message in its thread. `/` focuses the box. Covers what the human's inbox covers when a
// human is chosen, else every message.

import { h, fill, debounce, errorText } from "./util.js";

const PAGE = 20;

export class SearchView {
  constructor(app, q) {
    this.app = app;
    this.q = q;
    this.seq = 0;
    this.count = h("span", { class: "count", role: "status", "aria-live": "polite" });   // read out as results come
    this.box = h("div", { class: "results" });
    this.more = h("button", { type: "button", hidden: true, onclick: () => this.load(this.page + 1) }, "More results");
    this.el = h("section", { class: "view search", "aria-label": "Search" },
      h("header", { class: "view-head" }, h("h2", {}, "Search"), this.count),
      this.box, h("div", { class: "list-status" }, this.more));
    this.soon = debounce(() => this.load(1), 120);
    const input = document.getElementById("search").q;
    if (input.value.trim() !== q.trim()) input.value = q;
  }

  start() {
    return this.q ? this.load(1) : null;
  }

  destroy() {}

  query(q) {
    this.q = q;
    this.soon();
  }

  async load(page) {
    const seq = ++this.seq;
    const params = { query: liveQuery(this.q), page, page_size: PAGE };
    if (this.app.me) params.caller = this.app.me;
    let r;
    try {
      r = await this.app.rpc.call("message.search", params);
    } catch (err) {
      if (seq !== this.seq) return;
      this.count.textContent = "";
      fill(this.box, h("p", { class: "error search-error" }, errorText(err)));
      this.more.hidden = true;
      return;
    }
    if (seq !== this.seq) return;               // a newer query answered first
    this.page = page;
    this.results = page === 1 ? r.messages : [...this.results, ...r.messages];
    this.count.textContent = `${r.total.toLocaleString()} result${r.total === 1 ? "" : "s"}`;
    const ctx = this.app.messageContext({ showRead: false });
    const rows = r.messages.map((m) => this.row(m, ctx));
    if (page === 1) fill(this.box, rows.length ? rows : h("p", { class: "list-status" }, "Nothing found."));
    else this.box.append(...rows);
    this.more.hidden = page >= (r.total_pages || 1);
  }

  /** A hit: the message as everywhere, its body cut to the snippet, the words that matched marked. */
  row(m, ctx) {
    const el = this.app.renderMessage(m, ctx);
    const body = el.querySelector(".body");
    if (body && !m.deleted && Array.isArray(m.snippet) && m.snippet.length) {
      body.replaceWith(h("div", { class: "body snippet" }, segments(m.snippet)));
    }
    const subject = el.querySelector(".subject");
    if (subject && Array.isArray(m.subject_snippet) && m.subject_snippet.length) fill(subject, segments(m.subject_snippet));
    return el;
  }

  openFirst() {
    if (this.results && this.results.length) this.app.thread.open(this.results[0].message_id);
  }

  // the keyboard's selection (j/k, Enter/o, r)
  current() {
    const el = this.box.querySelector(".msg.selected");
    return el ? el._item : null;
  }

  move(step) {
    const rows = [...this.box.querySelectorAll(".msg")];
    if (!rows.length) return;
    const at = rows.findIndex((el) => el.classList.contains("selected"));
    const next = rows[Math.max(0, Math.min(rows.length - 1, at < 0 ? (step > 0 ? 0 : rows.length - 1) : at + step))];
    for (const el of rows) el.classList.toggle("selected", el === next);
    next.focus({ preventScroll: true });
    next.scrollIntoView({ block: "nearest" });
  }
}

/**
 * What is asked as you type: the word being typed is a prefix (`parse_con` finds
 * `parse_config`), as a search box that answers per keystroke must; a phrase, a
 * filter (`from:…`), an exclusion, a word already starred or one followed by a
 * space are left as they are. The box and the address keep what was typed.
 */
export function liveQuery(q) {
  return /(^|\s)[^\s"*:\-()][^\s"*:()]*$/.test(q) ? `${q}*` : q;
}

/**
 * message.search's snippet: segments {text, hit} whose texts, joined, are the
 * message's own words; each goes in as text, a hit inside <mark>.
 */
function segments(list) {
  return list.map((seg) => (seg.hit ? h("mark", {}, seg.text) : String(seg.text)));
}
