// The main views: the live feed of every message, and one agent's inbox.
// A view has `el`, `start()`, `destroy()` and `onNote(method, params)`.

import { MessageList, PAGE_SIZE, fromEvent } from "./messages.js";
import { h, fill, debounce, parseTag, toast, errorText } from "./util.js";

/** Every message, newest first, pushed as it is written. Deleted ones stay, marked. */
export class FeedView {
  constructor(app) {
    this.app = app;
    this.count = h("span", { class: "count" });
    this.list = new MessageList({
      fetchPage: (page) => app.rpc.call("message.list", {
        include_deleted: true, include_archived: true, page_size: PAGE_SIZE, page,
        sort_by: "created_at", sort_order: "desc",
      }),
      ctx: app.messageContext({ showRead: false }),
      empty: "No messages yet. Send one with “New message”, or from a terminal: thrum send \"hello\" --to @everyone",
      onLoaded: () => this.showCount(),
    });
    this.el = h("section", { class: "view feed", "aria-label": "Feed" },
      h("header", { class: "view-head" }, h("h2", {}, "Feed"), this.count, h("span", { class: "live-dot", title: "live" })),
      this.list.el);
  }

  showCount() {
    const n = this.list.total;
    this.count.textContent = `${n.toLocaleString()} message${n === 1 ? "" : "s"}`;
  }

  start() {
    return this.list.start();
  }

  destroy() {
    this.list.destroy();
  }

  onNote(method, p) {
    if (method === "message.create") {
      const el = this.list.prepend(fromEvent(p));
      if (el) {
        this.showCount();
        this.app.markOnScreen(p.message_id);
      }
    } else if (method === "message.edit") {
      const old = this.list.byId.get(p.message_id);
      this.list.update(p.message_id, { body: p.body, edited: true, updated_at: p.timestamp,
        version: old ? (old._item.version || 0) + 1 : 1 });
    } else if (method === "message.delete") {
      this.list.update(p.message_id, { deleted: true, delete_reason: p.reason || "" });
    }
  }
}

/** What `thrum inbox` shows for one agent (all but its own messages), with the same filters. */
export class InboxView {
  constructor(app, agent, filters) {
    this.app = app;
    this.agent = agent;
    this.filters = filters;      // {mentions: bool, unread: bool, scope: "type:value" | ""}
    this.counts = h("span", { class: "count" });
    const params = { caller: agent, exclude_own: true, sort_by: "created_at", sort_order: "desc" };
    if (filters.mentions) params.mentions = true;
    if (filters.unread) params.unread = true;
    const scope = parseTag(filters.scope);
    if (scope) params.scope = scope;
    this.params = params;
    this.list = new MessageList({
      fetchPage: (page) => app.rpc.call("message.list", { ...params, page, page_size: PAGE_SIZE }),
      ctx: app.messageContext({ showRead: true, reader: agent }),
      empty: filters.mentions || filters.unread || filters.scope ? "Nothing matches these filters." : "This inbox is empty.",
    });
    this.refreshTop = debounce(() => this.loadNewest(), 120);
    this.meta = h("span", { class: "agent-meta" });
    this.el = h("section", { class: "view inbox", "aria-label": `Inbox of ${agent}` },
      h("header", { class: "view-head" },
        h("h2", {}, "Inbox of ", h("span", { class: "author" }, "@" + agent)),
        this.meta, this.counts),
      this.toolbar(),
      this.list.el);
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
    const form = h("form", { class: "filters", onsubmit: (ev) => { ev.preventDefault(); apply(); } },
      h("label", {}, mentions, " mentions"),
      h("label", {}, unread, " unread"),
      scope,
      h("button", { type: "submit" }, "Filter"),
      h("span", { class: "spacer" }),
      h("button", { type: "button", class: "mark-all", onclick: () => this.markAllRead() }, "Mark all read"));
    return form;
  }

  showCounts() {
    const c = this.app.counts.get(this.agent);
    fill(this.counts, c ? h("span", {}, h("b", { class: "unread-count" }, String(c.unread)), ` unread of ${c.total}`) : "");
  }

  start() {
    return this.list.start();
  }

  destroy() {
    this.list.destroy();
  }

  async loadNewest() {
    try {
      const result = await this.app.rpc.call("message.list", { ...this.params, page: 1, page_size: PAGE_SIZE });
      for (const m of [...result.messages].reverse()) {
        if (!this.list.has(m.message_id) && this.list.prepend(m)) this.app.markOnScreen(m.message_id);
      }
    } catch (err) {
      toast(`could not refresh the inbox: ${errorText(err)}`, "error");
    }
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
    } else if (method === "message.edit") {
      this.list.update(p.message_id, { body: p.body, edited: true, updated_at: p.timestamp });
    } else if (method === "message.delete") {
      this.list.update(p.message_id, { deleted: true, delete_reason: p.reason || "" });
    } else if ((method === "message.read" || method === "message.unread") && p.agent_id === this.agent) {
      this.list.setRead(p.message_ids || [], method === "message.read");
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
