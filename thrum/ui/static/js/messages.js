// One message, drawn: author (colour and initials), subject, Markdown body,
// structured data, scopes and refs, ids with permalinks, delivery states and
// the actions that fit (mark read, reply, edit, delete, archive). Every piece
// of text goes in as text (see markdown.js).

import { h, shortTime, colourOf, initialsOf, copyText, toast, icon } from "./util.js";
import { renderMarkdown } from "./markdown.js";

/** A message.create notification's params as a message.list item. */
export function fromEvent(p) {
  const refs = p.refs || [];
  const reply = refs.find((r) => r.type === "reply_to");
  return {
    message_id: p.message_id,
    agent_id: p.agent_id,
    thread_id: p.thread_id || "",
    subject: p.subject || "",
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

/** The patch a message.edit / message.delete notification makes to an item. */
export function patchFor(method, p, item) {
  if (method === "message.edit") {
    return { body: p.body || (item && item.body), edited: true, updated_at: p.timestamp,
      version: item ? (item.version || 0) + 1 : 1 };
  }
  return { deleted: true, delete_reason: p.reason || "" };
}

export function permalink(id) {
  return `${location.origin}/#/m/${encodeURIComponent(id)}`;
}

/** "msg_01KB2X3Y4Z5A": a prefix that names the message (the CLI takes it); the id's end is its author's key tag. */
export function shortId(id) {
  return id.length > 16 ? id.slice(0, 16) : id;
}

export function avatar(name, display = "") {
  return h("span", { class: "avatar", style: { background: colourOf(name) }, "aria-hidden": "true" },
    initialsOf(name, display));
}

/**
 * The element for one message. ctx: {kindOf(agent) -> "agent"|"user", displayOf(agent), onOpen(item),
 * showRead: bool, actions(item) -> [elements] | null, delivery(item) -> element | null}.
 */
export function renderMessage(m, ctx) {
  const el = h("article", { class: "msg", dataset: { id: m.message_id, priority: m.priority || "normal" }, tabindex: -1 });
  el._item = m;
  el.classList.toggle("unread", Boolean(ctx.showRead && !m.is_read));
  el.classList.toggle("deleted", Boolean(m.deleted));
  el.classList.toggle("edited", Boolean(m.edited));
  el.style.setProperty("--who", colourOf(m.agent_id));
  const human = ctx.kindOf && ctx.kindOf(m.agent_id) === "user";
  const mentions = m.refs.filter((r) => r.type === "mention");
  const otherRefs = m.refs.filter((r) => r.type !== "mention" && r.type !== "reply_to");
  const copy = h("button", { type: "button", class: "icon copy", title: "Copy a link to this message",
    "aria-label": "Copy link", onclick: async () => {
      toast(await copyText(permalink(m.message_id)) ? "Link copied" : permalink(m.message_id));
    } }, icon("link"));
  const head = h("header", { class: "msg-head" },
    ctx.showRead ? h("span", { class: "marker", title: m.is_read ? "read" : "unread" }, m.is_read ? "○" : "●") : null,
    h("a", { class: "author", href: `#/inbox/${encodeURIComponent(m.agent_id)}`, title: `inbox of @${m.agent_id}` },
      "@" + m.agent_id),
    human ? h("span", { class: "badge human" }, "human") : null,
    m.reply_to ? h("a", { class: "reply-of", href: `#/m/${encodeURIComponent(m.reply_to)}`, title: `reply to ${m.reply_to}` },
      "↳ reply") : null,
    mentions.length ? h("span", { class: "mentions" }, "→ ", mentions.map((r) => h("span", { class: "mention" }, "@" + r.value))) : null,
    h("span", { class: "spacer" }),
    m.priority && m.priority !== "normal" ? h("span", { class: `badge prio prio-${m.priority}` }, m.priority) : null,
    m.edited ? h("span", { class: "badge edited-tag", title: m.updated_at ? `edited ${m.updated_at}` : "edited" }, "edited") : null,
    m.deleted ? h("span", { class: "badge deleted-tag" }, "deleted") : null,
    h("a", { class: "mid", href: `#/m/${encodeURIComponent(m.message_id)}`, title: m.message_id }, shortId(m.message_id)),
    copy,
    h("time", { datetime: m.created_at, title: m.created_at }, shortTime(m.created_at)),
  );
  const tags = m.scopes.length || otherRefs.length
    ? h("div", { class: "tags" },
      m.scopes.map((s) => h("span", { class: "scope" }, `${s.type}:${s.value}`)),
      otherRefs.map((r) => h("span", { class: "ref" }, `${r.type}:${r.value}`)))
    : null;
  const subject = m.subject && !m.deleted ? h("div", { class: "subject" }, m.subject) : null;
  const body = h("div", { class: "body" });
  if (m.deleted) body.append(m.delete_reason ? `(deleted: ${m.delete_reason})` : "(deleted)");
  else body.append(renderMarkdown(m.body.content));
  const structured = !m.deleted && m.body.structured ? structuredBlock(m.body.structured) : null;
  const delivery = ctx.delivery ? ctx.delivery(m) : null;
  const actions = ctx.actions ? ctx.actions(m) : null;
  el.append(avatar(m.agent_id, ctx.displayOf ? ctx.displayOf(m.agent_id) : ""),
    h("div", { class: "msg-main" }, head, subject, tags, body, structured, delivery,
      actions && actions.length ? h("footer", { class: "msg-actions" }, actions) : null));
  el.addEventListener("click", (ev) => {
    if (ev.target.closest("button, a, input, select, textarea, summary, details, pre")) return;
    if (ctx.onOpen) ctx.onOpen(m);
  });
  el.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && ev.target === el && ctx.onOpen) ctx.onOpen(m);
  });
  return el;
}

function structuredBlock(raw) {
  let text = typeof raw === "string" ? raw : JSON.stringify(raw);
  try {
    text = JSON.stringify(JSON.parse(text), null, 2);
  } catch (e) {
    // not JSON: shown as it is
  }
  return h("details", { class: "structured" }, h("summary", {}, "structured data"), h("pre", {}, text));
}
