// The panels that are not message lists: agents and groups (with group
// management), the thread list, and sync.

import { h, fill, ago, shortTime, toast, errorText, presenceText } from "./util.js";
import { avatar } from "./messages.js";
import { inboxHash } from "./views.js";
import { ask } from "./compose.js";

const NAME = "[a-z0-9_]{1,64}";

/** Every agent (role, module, status, last seen, unread) and every group, which the human can manage. */
export class AgentsView {
  constructor(app) {
    this.app = app;
    this.agentsBox = h("div", { class: "table-wrap" });
    this.groupsBox = h("div", { class: "table-wrap" });
    this.el = h("section", { class: "view agents", "aria-label": "Agents and groups" },
      h("header", { class: "view-head" }, h("h2", {}, "Agents")), this.agentsBox,
      h("header", { class: "view-head" }, h("h2", {}, "Groups"), h("span", { class: "spacer" }), this.newGroupForm()),
      this.groupsBox);
  }

  async start() {
    this.renderAgents();
    await this.loadGroups();
  }

  destroy() {}

  renderAgents() {
    const rows = [...this.app.agents.values()].map((a) => {
      const c = this.app.counts.get(a.agent_id);
      return h("tr", { dataset: { agent: a.agent_id } },
        h("td", { class: "who" }, avatar(a.agent_id, a.display),
          h("span", {}, h("a", { href: inboxHash(a.agent_id, {}), class: "author" }, "@" + a.agent_id),
            a.display ? h("div", { class: "sub" }, a.display) : null)),
        h("td", {}, a.kind === "user" ? "human" : "agent"),
        h("td", {}, a.role),
        h("td", {}, a.module || "—"),
        h("td", { class: `presence ${a.status || "offline"}`, title: presenceText(a) }, a.status || "offline"),
        h("td", { title: a.last_seen_at || "" }, ago(a.last_seen_at)),
        h("td", { class: "num" }, c ? String(c.unread) : "…"));
    });
    fill(this.agentsBox, rows.length
      ? h("table", { class: "grid" },
        h("thead", {}, h("tr", {}, ["name", "kind", "role", "module", "status", "last seen", "unread"].map((t) => h("th", {}, t)))),
        h("tbody", {}, rows))
      : h("p", { class: "list-status" }, "No agents yet: thrum quickstart --name NAME --role ROLE"));
  }

  // ------------------------------------------------------------------ groups

  newGroupForm() {
    const name = h("input", { type: "text", name: "group", placeholder: "new group", pattern: NAME, required: true,
      size: 12, "aria-label": "new group name" });
    const description = h("input", { type: "text", name: "description", placeholder: "description (optional)", size: 20 });
    return h("form", { class: "row new-group", onsubmit: async (ev) => {
      ev.preventDefault();
      const params = { name: name.value.trim() };
      if (description.value.trim()) params.description = description.value.trim();
      if (await this.act("group.create", params, `Group @${params.name} created`)) {
        name.value = "";
        description.value = "";
      }
    } }, name, description, h("button", { type: "submit" }, "Create group"));
  }

  /** A group change as the human at the keyboard (asked for first when nobody is chosen). */
  async act(method, params, done) {
    if (!this.app.me) {
      this.app.chooseIdentity(() => this.act(method, params, done));
      return false;
    }
    try {
      await this.app.rpc.call(method, { caller: this.app.me, ...params });
      toast(done);
      await this.loadGroups();
      return true;
    } catch (err) {
      toast(errorText(err), "error");
      return false;
    }
  }

  async loadGroups() {
    try {
      const { groups } = await this.app.rpc.call("group.list");
      const infos = await Promise.all(groups.map((g) => this.app.rpc.call("group.info", { name: g.name })
        .then((r) => r.group).catch(() => ({ ...g, members: [] }))));
      fill(this.groupsBox, h("table", { class: "grid" },
        h("thead", {}, h("tr", {}, ["group", "description", "members", ""].map((t) => h("th", {}, t)))),
        h("tbody", {}, infos.map((g) => this.groupRow(g)))));
    } catch (err) {
      fill(this.groupsBox, h("p", { class: "list-status" }, `could not load groups: ${errorText(err)}`));
    }
  }

  groupRow(g) {
    const members = g.builtin ? `every agent (${g.member_count})`
      : (g.members || []).map((m) => h("span", { class: "chip", dataset: { member: `${m.type}:${m.value}` } },
        m.type === "role" ? `role ${m.value}` : "@" + m.value,
        h("button", { type: "button", class: "chip-x", "aria-label": `remove ${m.value} from @${g.name}`,
          onclick: () => this.act("group.member.remove", { group: g.name, member: m.value, member_type: m.type },
            `Removed ${m.value} from @${g.name}`) }, "×")));
    const add = h("input", { type: "text", name: "member", placeholder: "@agent or role:NAME", size: 14,
      list: "address-options", "aria-label": `add a member to @${g.name}` });
    const addForm = g.builtin ? null : h("form", { class: "row add-member", onsubmit: (ev) => {
      ev.preventDefault();
      const text = add.value.trim();
      const role = text.match(/^role:\s*(\S+)$/);
      const member = role ? role[1] : text.replace(/^@+/, "");
      if (!member) return;
      this.act("group.member.add", { group: g.name, member, member_type: role ? "role" : "agent" },
        `Added ${text} to @${g.name}`);
    } }, add, h("button", { type: "submit" }, "Add"));
    const remove = g.builtin ? null : h("button", { type: "button", class: "danger-link", onclick: async () => {
      const yes = await ask(document.getElementById("ask"), { title: `Delete @${g.name}?`,
        text: "Messages already sent to it stay; nobody is reached through it any more.", yes: "Delete group", danger: true });
      if (yes) this.act("group.delete", { name: g.name }, `Group @${g.name} deleted`);
    } }, "Delete");
    return h("tr", { dataset: { group: g.name } },
      h("td", {}, "@" + g.name, g.builtin ? h("span", { class: "badge" }, "built-in") : null),
      h("td", {}, g.description || "—"),
      h("td", {}, h("div", { class: "members" }, members || "—"), addForm),
      h("td", {}, remove));
  }

  onNote(method) {
    if (method.startsWith("group.")) this.loadGroups();
  }

  onAgents() {
    this.renderAgents();
  }
}

/** The human's threads, newest activity first (thread.list), a page at a time. */
export class ThreadsView {
  constructor(app) {
    this.app = app;
    this.page = 1;
    this.box = h("div", { class: "thread-list" });
    this.more = h("button", { type: "button", hidden: true, onclick: () => this.load(this.page + 1) }, "More threads");
    this.el = h("section", { class: "view threads", "aria-label": "Threads" },
      h("header", { class: "view-head" }, h("h2", {}, "Threads"),
        h("span", { class: "count" }, app.me ? `of @${app.me}` : "")),
      this.box, h("div", { class: "list-status" }, this.more));
  }

  async start() {
    if (!this.app.me) {
      fill(this.box, h("p", { class: "list-status" }, "Choose who you are (top right) to list your threads."));
      return;
    }
    await this.load(1);
  }

  async load(page) {
    let r;
    try {
      r = await this.app.rpc.call("thread.list", { caller: this.app.me, page, page_size: 50 });
    } catch (err) {
      fill(this.box, h("p", { class: "list-status" }, `could not list threads: ${errorText(err)}`));
      return;
    }
    this.page = page;
    const rows = r.threads.map((t) => h("a", { class: "thread-row", href: `#/t/${encodeURIComponent(t.thread_id)}`,
      dataset: { thread: t.thread_id } },
      avatar(t.last_sender || "?"),
      h("span", { class: "thread-main" },
        h("span", { class: "thread-subject" }, t.subject || t.preview || t.thread_id),
        h("span", { class: "sub" }, `@${t.last_sender} · ${t.message_count} message${t.message_count === 1 ? "" : "s"}`,
          t.subject && t.preview ? ` · ${t.preview}` : "")),
      t.unread_count ? h("span", { class: "unread-badge" }, String(t.unread_count)) : null,
      h("time", { datetime: t.last_activity, title: t.last_activity }, shortTime(t.last_activity))));
    if (page === 1) fill(this.box, rows.length ? rows : h("p", { class: "list-status" }, "No threads yet."));
    else this.box.append(...rows);
    this.more.hidden = page >= (r.total_pages || 1);
  }

  destroy() {}

  onNote(method) {
    if (method === "message.create" || method === "message.read") {
      clearTimeout(this.soon);
      this.soon = setTimeout(() => this.load(1), 400);
    }
  }
}

/** Sync state (mode, remote, last success or error, pending events) and "Sync now". */
export class SyncView {
  constructor(app) {
    this.app = app;
    this.box = h("div", { class: "sync-state" });
    this.result = h("p", { class: "sync-result", role: "status" });
    this.button = h("button", { type: "button", class: "primary", onclick: () => this.syncNow() }, "Sync now");
    this.el = h("section", { class: "view sync", "aria-label": "Sync" },
      h("header", { class: "view-head" }, h("h2", {}, "Sync"), h("span", { class: "spacer" }), this.button),
      this.box, this.result);
  }

  async start() {
    this.show(await this.app.syncStatus());
  }

  destroy() {}

  onSync(s) {
    this.show(s);
  }

  show(s) {
    if (!s) {
      fill(this.box, h("p", { class: "error" }, "sync status unavailable"));
      return;
    }
    const row = (k, v, cls) => h("tr", { dataset: { key: k } }, h("th", {}, k), h("td", { class: cls || "" }, v));
    const remote = s.remote ? `${s.remote}${s.remote_url ? " — " + s.remote_url : ""}` : "none (local only)";
    fill(this.box, h("table", { class: "kv" }, h("tbody", {},
      row("mode", s.mode || "—"),
      row("remote", remote),
      s.mode === "remote" && s.interval_s ? row("interval", `every ${s.interval_s} s`) : null,
      row("last success", s.last_success ? `${shortTime(s.last_success)} (${ago(s.last_success)})` : "never"),
      row("last error", s.last_error ? `${s.last_error}${s.last_error_at ? " — " + shortTime(s.last_error_at) : ""}` : "none",
        s.last_error ? "error" : ""),
      row("pending events", String(s.pending_events ?? 0)),
      s.quarantined ? row("quarantined lines", String(s.quarantined), "error") : null,
      ...chainRows(s.chains).map(([k, v]) => row(k, v, "error")),
      ...(s.name_conflicts || []).map((c) =>
        row(`name conflict @${c.name}`, c.message, c.open ? "error" : "")),
      row("trust", s.team && s.team.trust === "team-root"
        ? `team root (${s.team.policy} policy; ${s.team.source || ""})`
        : "trust on first use (no team root)"),
      ...((s.team && s.team.retired) || []).map((r) =>
        row(`retired key @${r.name}`, `${r.key.slice(0, 12)}… ${r.why}`, "error")),
      ...Object.entries((s.team && s.team.rotations) || {}).flatMap(([name, m]) =>
        Object.entries(m).map(([old, to]) =>
          row(`rotated key @${name}`, `${old.slice(0, 12)}… → ${to.to.slice(0, 12)}… at ${to.at}`))))));
  }

  async syncNow() {
    this.button.disabled = true;
    this.button.textContent = "Syncing…";
    this.result.textContent = "";
    let cls = "ok";
    let text;
    try {
      const r = await this.app.rpc.call("sync.run");
      cls = r.ok === false ? "error" : "ok";
      text = r.ok === false
        ? `sync failed: ${r.error || "unknown error"}`
        : `synced in ${r.duration_ms ?? "?"} ms: sent ${r.sent ?? 0}, received ${r.received ?? 0}`;
    } catch (err) {
      cls = "error";
      text = `sync failed: ${errorText(err)}`;
      toast(text, "error");
    } finally {
      this.button.disabled = false;
      this.button.textContent = "Sync now";
      this.show(await this.app.syncStatus());       // the state after it, shown with the outcome
      this.result.className = `sync-result ${cls}`;
      this.result.textContent = text;
    }
  }
}

// Per-writer chains (issue 25): gaps, forks and rollbacks, each with its own numbers.
function chainRows(c) {
  if (!c) return [];
  const out = [];
  for (const g of c.gaps || []) out.push(["withheld", g.text]);
  for (const f of c.faults || []) out.push([f.kind === "fork" ? "fork" : "broken chain", f.text]);
  for (const r of c.rollbacks || []) out.push(["rollback", r.text]);
  return out;
}
