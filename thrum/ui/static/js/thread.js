// The thread pane: one thread, oldest first, with a reply box. Opening a thread as
// the human at the keyboard marks its messages read for that human (never for an
// agent: a watcher must not consume an agent's unread messages).

import { fromEvent, patchFor } from "./messages.js";
import { h, fill, toast, errorText } from "./util.js";

export class ThreadPane {
  constructor(app, el) {
    this.app = app;
    this.el = el;
    this.threadId = null;
    this.focusId = null;
    this.byId = new Map();
    this.ctx = app.messageContext({ showRead: false, onOpen: (m) => this.focus(m.message_id), inThread: true });
  }

  get isOpen() {
    return !this.el.hidden;
  }

  /** Open the thread of message ``id`` (or the thread ``threadId``), that message in focus. */
  async open(id, { threadId = null, reply = false } = {}) {
    const key = threadId || id;
    this.focusId = id;
    this.threadId = null;
    this.opening = key;
    this.byId.clear();
    this.items = h("div", { class: "thread-items" }, h("p", { class: "list-status" }, "loading…"));
    this.title = h("h2", {}, "Thread");
    const close = h("button", { type: "button", class: "icon close", "aria-label": "Close thread", onclick: () => this.close() }, "✕");
    this.replyForm = this.replyBox();
    fill(this.el, h("header", { class: "view-head" }, this.title, h("span", { class: "spacer" }), close),
      this.items, this.replyForm);
    this.el.hidden = false;
    document.body.classList.add("thread-open");
    const params = threadId ? { thread_id: threadId } : { message_id: id };
    if (this.app.me) params.caller = this.app.me;
    let result;
    try {
      result = await this.app.rpc.call("message.thread", params);
    } catch (err) {
      fill(this.items, h("p", { class: "list-status" }, `could not load the thread: ${errorText(err)}`));
      return;
    }
    if (this.opening !== key) return;          // another thread was opened meanwhile
    this.threadId = result.thread_id;
    fill(this.items);
    for (const m of result.messages) this.add(m);
    if (!result.messages.length) fill(this.items, h("p", { class: "list-status" }, "This message is gone (deleted)."));
    const subject = result.messages.map((m) => m.subject).find(Boolean);
    this.title.textContent = subject ? `Thread: ${subject}` : "Thread";
    const last = result.messages.length ? result.messages[result.messages.length - 1].message_id : null;
    this.focus(id && this.byId.has(id) ? id : last);
    this.markRead(result.messages);
    if (reply) this.focusReply();
  }

  close() {
    this.el.hidden = true;
    this.threadId = null;
    this.focusId = null;
    this.opening = null;
    this.byId.clear();
    document.body.classList.remove("thread-open");
  }

  add(m) {
    if (this.byId.has(m.message_id)) return null;
    const el = this.app.renderMessage(m, this.ctx);
    this.byId.set(m.message_id, el);
    this.items.append(el);
    return el;
  }

  focus(id) {
    for (const [mid, el] of this.byId) el.classList.toggle("focus", mid === id);
    const el = this.byId.get(id);
    if (el) {
      this.focusId = id;
      el.scrollIntoView({ block: "nearest" });
      if (this.target) this.target.textContent = `@${el._item ? el._item.agent_id : ""}`;
    }
  }

  focusReply() {
    const box = this.el.querySelector('textarea[name="reply"]');
    if (box) box.focus();
    else this.app.chooseIdentity();
  }

  async markRead(messages) {
    const me = this.app.me;
    if (!me) return;
    const ids = messages.filter((m) => !m.is_read && m.agent_id !== me).map((m) => m.message_id);
    if (!ids.length) return;
    try {
      await this.app.rpc.call("message.markRead", { caller: me, message_ids: ids });
    } catch (err) {
      toast(`could not mark the thread read: ${errorText(err)}`, "error");
    }
  }

  replyBox() {
    if (!this.app.me) {
      return h("div", { class: "reply signin" },
        h("button", { type: "button", onclick: () => this.app.chooseIdentity() }, "Choose who you are"), " to reply.");
    }
    const text = h("textarea", { name: "reply", rows: 3, placeholder: "Reply… (Markdown)", required: true, "aria-label": "Reply" });
    this.target = h("span", { class: "author" });
    const send = h("button", { type: "submit", class: "primary" }, "Reply");
    const form = h("form", { class: "reply" },
      h("div", { class: "reply-to" }, "Reply as ", h("span", { class: "author" }, "@" + this.app.me), " to ", this.target),
      text, h("div", { class: "row" }, h("span", { class: "hint" }, "Ctrl+Enter sends · Esc leaves"),
        h("span", { class: "spacer" }), send));
    const submit = async () => {
      const content = text.value;
      if (!content.trim() || !this.focusId) return;
      send.disabled = true;
      try {
        await this.app.rpc.call("message.send", { caller: this.app.me, content, reply_to: this.focusId });
        text.value = "";
      } catch (err) {
        toast(`reply not sent: ${errorText(err)}`, "error");
      } finally {
        send.disabled = false;
      }
    };
    form.addEventListener("submit", (ev) => { ev.preventDefault(); submit(); });
    text.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) { ev.preventDefault(); submit(); }
      if (ev.key === "Escape") { ev.preventDefault(); text.blur(); }
    });
    return form;
  }

  onNote(method, p) {
    if (!this.isOpen || !this.threadId) return;
    if (method === "message.create" && p.thread_id === this.threadId) {
      const el = this.add(fromEvent(p));
      if (el) {
        el.scrollIntoView({ block: "nearest" });
        if (this.app.me && p.agent_id !== this.app.me) this.markRead([{ message_id: p.message_id, agent_id: p.agent_id }]);
      }
    } else if (method === "message.edit" || method === "message.delete") {
      const el = this.byId.get(p.message_id);
      if (!el) return;
      const item = { ...el._item, ...patchFor(method, p, el._item) };
      const fresh = this.app.renderMessage(item, this.ctx);
      fresh.classList.toggle("focus", el.classList.contains("focus"));
      el.replaceWith(fresh);
      this.byId.set(p.message_id, fresh);
    }
  }
}
