// Messages: one element per message, and a list that pages in older messages as
// you scroll and takes live ones at the top. Edits, deletes and read marks are
// applied to the element in place.

import { h, fill, shortTime } from "./util.js";

export const PAGE_SIZE = 50;

/** A message.create notification's params as a message.list item. */
export function fromEvent(p) {
  const refs = p.refs || [];
  const reply = refs.find((r) => r.type === "reply_to");
  return {
    message_id: p.message_id,
    agent_id: p.agent_id,
    thread_id: p.thread_id || "",
    body: p.body || { format: "markdown", content: "", structured: "" },
    scopes: p.scopes || [],
    refs,
    priority: p.priority || "normal",
    created_at: p.timestamp,
    updated_at: "",
    deleted: false,
    is_read: false,
    edited: false,
    version: 0,
    reply_to: reply ? reply.value : "",
  };
}

/**
 * The element for one message. ctx: {kindOf(agent) -> "agent"|"user", onOpen(item),
 * showRead: bool, actions(item) -> [elements] | null}.
 */
export function renderMessage(m, ctx) {
  const el = h("article", { class: "msg", dataset: { id: m.message_id }, tabindex: 0 });
  el._item = m;
  paint(el, m, ctx);
  el.addEventListener("click", (ev) => {
    if (ev.target.closest("button, a, input, select, textarea")) return;
    if (ctx.onOpen) ctx.onOpen(el._item);
  });
  el.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && ev.target === el && ctx.onOpen) ctx.onOpen(el._item);
  });
  return el;
}

/** (Re)draw a message element from its item. */
export function paint(el, m, ctx) {
  el._item = m;
  el.classList.toggle("unread", Boolean(ctx.showRead && !m.is_read));
  el.classList.toggle("deleted", Boolean(m.deleted));
  el.classList.toggle("edited", Boolean(m.edited));
  el.dataset.priority = m.priority || "normal";
  const human = ctx.kindOf && ctx.kindOf(m.agent_id) === "user";
  const mentions = m.refs.filter((r) => r.type === "mention");
  const otherRefs = m.refs.filter((r) => r.type !== "mention" && r.type !== "reply_to");
  const head = h("header", { class: "msg-head" },
    ctx.showRead ? h("span", { class: "marker", title: m.is_read ? "read" : "unread" }, m.is_read ? "○" : "●") : null,
    h("span", { class: "author" }, "@" + m.agent_id),
    human ? h("span", { class: "badge human" }, "human") : null,
    m.reply_to ? h("span", { class: "reply-of", title: `reply to ${m.reply_to}` }, "↳ reply") : null,
    mentions.length ? h("span", { class: "mentions" }, "→ ", mentions.map((r) => h("span", { class: "mention" }, "@" + r.value))) : null,
    h("span", { class: "spacer" }),
    m.priority && m.priority !== "normal" ? h("span", { class: `badge prio prio-${m.priority}` }, m.priority) : null,
    m.edited ? h("span", { class: "badge edited-tag", title: m.updated_at ? `edited ${m.updated_at}` : "edited" }, "edited") : null,
    m.deleted ? h("span", { class: "badge deleted-tag" }, "deleted") : null,
    h("time", { datetime: m.created_at, title: m.created_at }, shortTime(m.created_at)),
  );
  const tags = m.scopes.length || otherRefs.length
    ? h("div", { class: "tags" },
      m.scopes.map((s) => h("span", { class: "scope" }, `${s.type}:${s.value}`)),
      otherRefs.map((r) => h("span", { class: "ref" }, `${r.type}:${r.value}`)))
    : null;
  const body = h("div", { class: "body" }, m.deleted ? (m.delete_reason ? `(deleted: ${m.delete_reason})` : "(deleted)") : m.body.content);
  const actions = ctx.actions ? ctx.actions(m) : null;
  fill(el, head, tags, body, actions && actions.length ? h("footer", { class: "msg-actions" }, actions) : null);
}

/**
 * A paged, newest-first list. opts: {fetchPage(page) -> Promise<message.list result>,
 * ctx (renderMessage's), empty: text, onLoaded(result)}.
 */
export class MessageList {
  constructor(opts) {
    this.opts = opts;
    this.byId = new Map();
    this.el = h("div", { class: "msg-list", role: "feed", "aria-busy": "true" });
    this.items = h("div", { class: "items" });
    this.status = h("div", { class: "list-status" });
    this.sentinel = h("div", { class: "sentinel" });
    this.el.append(this.items, this.status, this.sentinel);
    this.page = 0;
    this.totalPages = 1;
    this.total = 0;
    this.loading = false;
    this.observer = new IntersectionObserver((entries) => {
      if (entries.some((e) => e.isIntersecting)) this.loadMore();
    }, { rootMargin: "600px" });
  }

  /** Load the first page; resolves once it is in the DOM. */
  async start() {
    await this.loadMore();
    this.observer.observe(this.sentinel);
  }

  destroy() {
    this.observer.disconnect();
  }

  async loadMore() {
    if (this.loading || this.page >= this.totalPages) return;
    this.loading = true;
    this.status.textContent = "loading…";
    try {
      const result = await this.opts.fetchPage(this.page + 1);
      this.page = result.page || this.page + 1;
      this.totalPages = result.total_pages || 0;
      this.total = result.total || 0;
      const frag = document.createDocumentFragment();
      for (const m of result.messages) {
        if (this.byId.has(m.message_id)) continue;       // shifted down by newer messages
        const el = renderMessage(m, this.opts.ctx);
        this.byId.set(m.message_id, el);
        frag.append(el);
      }
      this.items.append(frag);
      if (this.opts.onLoaded) this.opts.onLoaded(result);
    } catch (err) {
      this.status.textContent = `could not load messages: ${err.message}`;
      this.loading = false;
      return;
    }
    this.loading = false;
    this.el.setAttribute("aria-busy", "false");
    this.status.textContent = this.byId.size === 0 ? (this.opts.empty || "No messages.")
      : this.page >= this.totalPages ? "— the beginning —" : "";
    // a short first page can leave the sentinel visible: keep filling the screen
    if (this.page < this.totalPages && this.sentinel.getBoundingClientRect().top < window.innerHeight + 600) {
      queueMicrotask(() => this.loadMore());
    }
  }

  has(id) {
    return this.byId.has(id);
  }

  /** Put a new message at the top (newest first); returns its element (or null when known). */
  prepend(item) {
    if (this.byId.has(item.message_id)) return null;
    const el = renderMessage(item, this.opts.ctx);
    el.classList.add("fresh");
    this.byId.set(item.message_id, el);
    this.items.prepend(el);
    this.total += 1;
    if (this.status.textContent === (this.opts.empty || "No messages.")) this.status.textContent = "";
    return el;
  }

  /** Merge fields into a shown message and redraw it. */
  update(id, patch) {
    const el = this.byId.get(id);
    if (!el) return false;
    paint(el, { ...el._item, ...patch }, this.opts.ctx);
    return true;
  }

  setRead(ids, isRead) {
    for (const id of ids) this.update(id, { is_read: isRead });
  }

  repaintAll() {
    for (const el of this.byId.values()) paint(el, el._item, this.opts.ctx);
  }
}
