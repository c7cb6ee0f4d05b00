// Delivery states (issue 24; docs/design/delivery.md), drawn for a supervisor: how
// far each recipient got with a message (sent → delivered → surfaced → read →
// acked) and whether an acknowledgement asked for is still owed.
//
// An item carries them when it comes from message.get, message.sent or
// message.thread {delivery: true}: `delivery` (one entry per recipient) and `ack`.
// Items without `delivery` (the feed, inboxes) show only that an ack was asked.

import { h, shortTime } from "./util.js";

export const STATES = ["sent", "delivered", "surfaced", "read", "acked"];
const MEANING = {
  sent: "not in the recipient's replica yet",
  delivered: "in the recipient's replica",
  surfaced: "placed in the agent's context by a hook or tool",
  read: "marked read",
  acked: "acknowledged",
};
const MARK = { sent: "○", delivered: "◔", surfaced: "◑", read: "◕", acked: "●" };
const INLINE = 4;              // up to this many recipients are listed inline; more are summed up first

/** Receipt notifications that can move a recipient's state. */
export const DELIVERY_NOTES = new Set(["message.delivered", "message.surfaced", "message.read", "message.unread",
  "message.acked"]);

/** The element for an item's delivery states and ack, or null when there is nothing to say. */
export function deliveryBlock(m) {
  if (m.deleted) return null;
  const rows = Array.isArray(m.delivery) ? m.delivery : null;
  const ack = ackBadge(m.ack, rows && rows.length > 0 && rows.every((r) => r.state === "acked"));
  if (!rows) return ack ? h("div", { class: "delivery" }, ack) : null;
  if (!rows.length) {
    return h("div", { class: "delivery" }, ack, h("span", { class: "hint" }, "no recipients"));
  }
  const chips = rows.map(chip);
  if (rows.length <= INLINE) {
    return h("div", { class: "delivery", dataset: { recipients: rows.length }, "aria-label": "delivery" }, ack, chips);
  }
  const counts = new Map();
  for (const r of rows) counts.set(r.state, (counts.get(r.state) || 0) + 1);
  const sum = [...STATES].reverse().filter((s) => counts.has(s)).map((s) => `${counts.get(s)} ${s}`).join(" · ");
  return h("div", { class: "delivery", dataset: { recipients: rows.length }, "aria-label": "delivery" }, ack,
    h("details", { class: "recipients" },
      h("summary", {}, `${rows.length} recipients: ${sum}`),
      h("div", { class: "chips" }, chips)));
}

function chip(r) {
  const state = STATES.includes(r.state) ? r.state : "sent";
  const times = STATES.slice(1).map((s) => [s, r[`${s}_at`]]).filter(([, t]) => t)
    .map(([s, t]) => `${s} ${t}`);
  const title = [`@${r.agent}: ${state} (${MEANING[state]})`, ...times].join("\n");
  return h("span", { class: `dstate ${state}`, title, dataset: { agent: r.agent, state } },
    h("span", { class: "dmark", "aria-hidden": "true" }, MARK[state]),
    `@${r.agent} `, h("span", { class: "dname" }, state),
    r.at ? h("time", { datetime: r.at }, ` ${shortTime(r.at)}`) : null);
}

function ackBadge(ack, allAcked) {
  if (!ack) return null;
  if (allAcked) return h("span", { class: "badge ack done", title: "every recipient acknowledged it" }, "acknowledged");
  const due = ack.due ? ` by ${shortTime(ack.due)}` : "";
  if (ack.overdue) {
    return h("span", { class: "badge ack overdue", title: `an acknowledgement was due ${ack.due}` }, `ack overdue${due}`);
  }
  return h("span", { class: "badge ack", title: ack.due ? `acknowledge by ${ack.due}` : "an acknowledgement is asked" },
    `ack asked${due}`);
}

/**
 * Keeps items' delivery states fresh: receipts name message ids, the daemon says
 * what they mean. ``refetch(ids)`` returns the items again (with delivery);
 * ``apply(item)`` draws one. Receipts are batched (an agent's hook surfaces many at once).
 */
export class DeliveryWatch {
  constructor({ has, refetch, apply, delay = 150 }) {
    this.has = has;
    this.refetch = refetch;
    this.apply = apply;
    this.delay = delay;
    this.ids = new Set();
    this.timer = null;
  }

  onNote(method, p) {
    if (!DELIVERY_NOTES.has(method)) return;
    for (const id of p.message_ids || []) if (this.has(id)) this.ids.add(id);
    this.soon();
  }

  /** Read message ``id``'s states soon (a new message: whom it reaches is the daemon's to say). */
  want(id) {
    this.ids.add(id);
    this.soon();
  }

  soon() {
    if (this.ids.size && !this.timer) this.timer = setTimeout(() => this.flush(), this.delay);
  }

  async flush() {
    this.timer = null;
    const ids = [...this.ids];
    this.ids.clear();
    if (!ids.length) return;
    let items;
    try {
      items = await this.refetch(ids);
    } catch (err) {
      return;                   // the next receipt (or a reload) tries again
    }
    for (const m of items) if (m && this.has(m.message_id)) this.apply(m);
  }

  destroy() {
    clearTimeout(this.timer);
    this.timer = null;
  }
}
