// Search (message.search): results as you type, each with its snippet; a hit
// opens the message in its thread. Covers what the human's inbox covers when a
// human is chosen, else every message.

import { h, fill, debounce, errorText } from "./util.js";

const PAGE = 20;

export class SearchView {
  constructor(app, q) {
    this.app = app;
    this.q = q;
    this.seq = 0;
    this.count = h("span", { class: "count" });
    this.box = h("div", { class: "results" });
    this.more = h("button", { type: "button", hidden: true, onclick: () => this.load(this.page + 1) }, "More results");
    this.el = h("section", { class: "view search", "aria-label": "Search" },
      h("header", { class: "view-head" }, h("h2", {}, "Search"), this.count),
      this.box, h("div", { class: "list-status" }, this.more));
    this.soon = debounce(() => this.load(1), 120);
    const input = document.getElementById("search").q;
    if (input.value !== q) input.value = q;
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
    const params = { query: this.q, page, page_size: PAGE };
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
    const rows = r.messages.map((m) => {
      const el = this.app.renderMessage(m, ctx);
      if (m.snippet) {
        el.querySelector(".msg-main").insertBefore(h("div", { class: "snippet" }, snippet(m.snippet)),
          el.querySelector(".body"));
      }
      return el;
    });
    if (page === 1) fill(this.box, rows.length ? rows : h("p", { class: "list-status" }, "Nothing found."));
    else this.box.append(...rows);
    this.more.hidden = page >= (r.total_pages || 1);
  }

  openFirst() {
    if (this.results && this.results.length) this.app.thread.open(this.results[0].message_id);
  }
}

/** A snippet with its highlights: the daemon marks hits with \u0002…\u0003 (never HTML). */
function snippet(text) {
  const out = [];
  const parts = String(text).split(/(\u0002[^\u0003]*\u0003)/);
  for (const part of parts) {
    if (part.startsWith("\u0002")) out.push(h("mark", {}, part.slice(1, -1)));
    else if (part) out.push(part);
  }
  return out;
}
