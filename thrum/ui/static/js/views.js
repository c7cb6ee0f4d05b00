// The message views: the feed of every message, one agent's inbox, and the
// mentions of the human at the keyboard. A view has `el`, `start()`,
// `destroy()`, `onNote(method, params)`, and for the keyboard `move(step)`,
// `current()`.

import { VirtualList } from "./vlist.js";
import { fromEvent, patchFor } from "./messages.js";
import { h, fill, debounce, parseTag, toast, errorText, dayKey, dayLabel } from "./util.js";

const NEWEST_PAGES = 20;       // a burst bigger than this many pages re-reads the view instead

/** What every list view shares: the virtual list, dividers, the keyboard's selection, "N new ↑". */
class ListView {
  constructor(app, { label, title, showRead, reader = null, empty }) {
    this.app = app;
    this.showRead = showRead;
    this.ctx = app.messageContext({ showRead, reader });
    this.count = h("span", { class: "count" });
    this.above = 0;
    this.pill = h("button", { type: "button", class: "new-pill", hidden: true, onclick: () => this.toTop() });
    this.list = new VirtualList({
      scroller: document.getElementById("main"),
      fetchPage: (page, size) => this.fetchPage(page, size),
      render: (m) => app.renderMessage(m, this.ctx),
      divider: (i) => this.divider(i),
      empty,
      estimate: app.dense ? 44 : 86,
      onChange: () => this.changed(),
      onAbove: (n) => this.newAbove(n),
    });
    this.head = h("header", { class: "view-head" }, title, this.count, this.pill);
    this.el = h("section", { class: `view ${label}`, "aria-label": label }, this.head);
  }

  start() {
    return this.list.start();
  }

  destroy() {
    this.list.destroy();
  }

  changed() {
    const n = this.list.total;
    this.count.textContent = `${n.toLocaleString()} message${n === 1 ? "" : "s"}`;
    if (this.above && this.list.first === 0 && this.app.scroller.scrollTop < 40) {
      this.above = 0;
      this.pill.hidden = true;
    }
  }

  newAbove(n) {
    this.above += n;
    this.pill.textContent = `↑ ${this.above} new`;
    this.pill.hidden = false;
  }

  toTop() {
    this.app.scroller.scrollTop = 0;
    this.above = 0;
    this.pill.hidden = true;
  }

  /** A divider above row i: the day changes, or (with read state) unread ends. */
  divider(i) {
    const m = this.list.items[i];
    const prev = i > 0 ? this.list.items[i - 1] : null;
    if (!m || (i > 0 && !prev)) return null;
    const parts = [];
    let kind = "date";
    if (this.showRead && prev && !prev.is_read && m.is_read) {
      parts.push("read below");
      kind = "unread";
    }
    if (!prev || dayKey(prev.created_at) !== dayKey(m.created_at)) parts.push(dayLabel(m.created_at));
    return parts.length ? { text: parts.join(" · "), kind } : null;
  }

  // ------------------------------------------------------------------ the keyboard's selection

  current() {
    return this.list.selectedId ? this.list.get(this.list.selectedId) : null;
  }

  move(step) {
    const list = this.list;
    if (!list.total) return;
    let i = list.selectedId ? list.indexOf(list.selectedId) : -1;
    if (i < 0) i = step > 0 ? list.first - 1 : list.first + 1;
    i = Math.max(0, Math.min(list.total - 1, i + step));
    const m = list.items[i];
    if (!m) {                    // not loaded yet: bring it into view, try again once it is
      list.reveal(i);
      return;
    }
    list.select(m.message_id);
    list.reveal(i);
    requestAnimationFrame(() => {
      const el = list.element(m.message_id);
      if (el) el.focus({ preventScroll: true });
    });
  }

  // ------------------------------------------------------------------ live changes

  onNote(method, p) {
    if (method === "message.edit" || method === "message.delete") {
      const item = this.list.get(p.message_id);
      if (item) this.list.update(p.message_id, patchFor(method, p, item));
    }
  }

  setRead(ids, isRead) {
    for (const id of ids) this.list.update(id, { is_read: isRead });
  }
}

/** Every message, newest first, pushed as it is written. Deleted ones stay, marked. */
export class FeedView extends ListView {
  constructor(app) {
    super(app, {
      label: "feed",
      title: h("h2", {}, "Feed"),
      showRead: false,
      empty: "No messages yet. Send one with “New message”, or from a terminal: thrum send \"hello\" --to @everyone",
    });
    this.head.append(h("span", { class: "live-dot", title: "connection" }));
    this.el.append(this.list.el);
    this.seen = null;            // the newest message when the tab was last hidden
    this.onVisibility = () => {
      if (document.hidden) this.seen = this.list.items[0] ? this.list.items[0].message_id : null;
    };
    document.addEventListener("visibilitychange", this.onVisibility);
  }

  fetchPage(page, size) {
    return this.app.rpc.call("message.list", {
      include_deleted: true, include_archived: true, page_size: size, page, sort_by: "created_at", sort_order: "desc",
    });
  }

  destroy() {
    super.destroy();
    document.removeEventListener("visibilitychange", this.onVisibility);
  }

  divider(i) {
    const base = super.divider(i);
    const m = this.list.items[i];
    if (i > 0 && m && this.seen && m.message_id === this.seen) {
      return { text: ["new since you looked ↑", base && base.text].filter(Boolean).join(" · "), kind: "unread" };
    }
    return base;
  }

  onNote(method, p) {
    if (method === "message.create") {
      if (this.list.insert(fromEvent(p)) >= 0) this.app.markOnScreen(p.message_id);
    } else {
      super.onNote(method, p);
    }
  }
}

/**
 * A filtered inbox-like view: whether a new message belongs needs the daemon's address
 * resolution, so on news it reads the newest pages until it meets a message it has.
 */
class InboxLike extends ListView {
  constructor(app, opts, params) {
    super(app, opts);
    this.params = params;
    this.refreshTop = debounce(() => this.loadNewest(), 120);
  }

  fetchPage(page, size) {
    return this.app.rpc.call("message.list", { ...this.params, page, page_size: size });
  }

  async loadNewest() {
    const list = this.list;
    try {
      if (!list.items[0] && list.total) {       // the top is not loaded (scrolled far): its page will be
        list.apply(1, await this.fetchPage(1, 100), list.changes.length);
        list.forgetFrom(100);
        return;
      }
      const fresh = [];
      let met = false;
      for (let page = 1; page <= NEWEST_PAGES && !met; page += 1) {
        const r = await this.fetchPage(page, 100);
        for (const m of r.messages) {
          if (list.has(m.message_id)) {
            met = true;
            break;
          }
          fresh.push(m);
        }
        if (r.messages.length < 100) met = true;
      }
      if (!met) {
        await list.reset();
        return;
      }
      for (const m of fresh.reverse()) {
        if (list.insert(m) >= 0) this.app.markOnScreen(m.message_id);
      }
    } catch (err) {
      toast(`could not refresh: ${errorText(err)}`, "error");
    }
  }
}

/** What `thrum inbox` shows for one agent (all but its own messages), with the same filters. */
export class InboxView extends InboxLike {
  constructor(app, agent, filters) {
    const params = { caller: agent, exclude_own: true, sort_by: "created_at", sort_order: "desc" };
    if (filters.mentions) params.mentions = true;
    if (filters.unread) params.unread = true;
    const scope = parseTag(filters.scope);
    if (scope) params.scope = scope;
    super(app, {
      label: "inbox",
      title: h("h2", {}, "Inbox of ", h("span", { class: "author" }, "@" + agent)),
      showRead: true,
      reader: agent,
      empty: filters.mentions || filters.unread || filters.scope ? "Nothing matches these filters." : "This inbox is empty.",
    }, params);
    this.agent = agent;
    this.filters = filters;
    this.counts = h("span", { class: "count unread-line" });
    this.meta = h("span", { class: "agent-meta" });
    this.head.append(this.meta, this.counts);
    this.el.append(this.toolbar(), this.list.el);
    this.showCounts();
    this.onAgents();
  }

  onAgents() {
    const a = this.app.agents.get(this.agent);
    this.meta.textContent = !a ? "" : [a.role ? `role ${a.role}` : "", a.module ? `module ${a.module}` : "",
      a.kind === "user" ? "human" : "", this.agent === this.app.me ? "you" : ""].filter(Boolean).join(" · ");
  }

  toolbar() {
    const f = this.filters;
    const mentions = h("input", { type: "checkbox", name: "mentions", checked: f.mentions });
    const unread = h("input", { type: "checkbox", name: "unread", checked: f.unread });
    const scope = h("input", { type: "text", name: "scope", value: f.scope || "", placeholder: "scope type:value",
      size: 16, "aria-label": "scope filter" });
    const apply = () => {
      const next = { mentions: mentions.checked, unread: unread.checked, scope: scope.value.trim() };
      if (next.scope && !parseTag(next.scope)) {
        toast("scope filter: use type:value, e.g. module:auth", "error");
        return;
      }
      this.app.go(inboxHash(this.agent, next));
    };
    mentions.addEventListener("change", apply);
    unread.addEventListener("change", apply);
    return h("form", { class: "filters", onsubmit: (ev) => { ev.preventDefault(); apply(); } },
      h("label", {}, mentions, " mentions"),
      h("label", {}, unread, " unread"),
      scope,
      h("button", { type: "submit" }, "Filter"),
      h("span", { class: "spacer" }),
      h("button", { type: "button", class: "mark-all", onclick: () => this.markAllRead() }, "Mark all read"));
  }

  showCounts() {
    const c = this.app.counts.get(this.agent);
    fill(this.counts, c ? h("span", {}, h("b", { class: "unread-count" }, String(c.unread)), ` unread of ${c.total}`) : "");
  }

  async markAllRead() {
    const params = { caller: this.agent, all: true };
    if (this.params.mentions) params.mentions = true;
    if (this.params.scope) params.scope = this.params.scope;
    try {
      await this.app.rpc.call("message.markRead", params);
    } catch (err) {
      toast(errorText(err), "error");
    }
  }

  onNote(method, p) {
    if (method === "message.create") {
      if (p.agent_id !== this.agent) this.refreshTop();
    } else if (method === "message.delete") {
      this.list.remove(p.message_id);
    } else if (method === "message.archive" && p.agent_id === this.agent) {
      for (const id of p.message_ids || []) this.list.remove(id);
    } else if ((method === "message.read" || method === "message.unread") && p.agent_id === this.agent) {
      this.setRead(p.message_ids || [], method === "message.read");
    } else {
      super.onNote(method, p);
    }
  }
}

/** Messages that mention the human at the keyboard (or, without one, @human). */
export class MentionsView extends InboxLike {
  constructor(app) {
    const me = app.me;
    const params = me
      ? { caller: me, mentions: true, exclude_own: true, sort_by: "created_at", sort_order: "desc" }
      : { mention_role: "human", sort_by: "created_at", sort_order: "desc" };
    super(app, {
      label: "mentions",
      title: h("h2", {}, me ? h("span", {}, "Mentions of ", h("span", { class: "author" }, "@" + me)) : "Mentions of @human"),
      showRead: Boolean(me),
      reader: me,
      empty: me ? `Nobody has mentioned @${me} (or a role or group of yours) yet.` : "Nobody has mentioned @human yet.",
    }, params);
    this.me = me;
    if (!me) this.el.append(h("p", { class: "hint" }, "Choose who you are (top right) to see your own mentions."));
    this.el.append(this.list.el);
  }

  onNote(method, p) {
    if (method === "message.create") {
      if (p.agent_id !== this.me) this.refreshTop();
    } else if (method === "message.delete") {
      this.list.remove(p.message_id);
    } else if (method === "message.archive" && this.me && p.agent_id === this.me) {
      for (const id of p.message_ids || []) this.list.remove(id);
    } else if ((method === "message.read" || method === "message.unread") && p.agent_id === this.me) {
      this.setRead(p.message_ids || [], method === "message.read");
    } else {
      super.onNote(method, p);
    }
  }
}

/** "#/inbox/alice?unread=1&scope=module:auth" */
export function inboxHash(agent, f) {
  const q = new URLSearchParams();
  if (f.mentions) q.set("mentions", "1");
  if (f.unread) q.set("unread", "1");
  if (f.scope) q.set("scope", f.scope);
  const s = q.toString();
  return `#/inbox/${encodeURIComponent(agent)}${s ? "?" + s : ""}`;
}
