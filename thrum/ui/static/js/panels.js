// Agents and groups, and the sync panel.

import { h, fill, ago, shortTime, toast, errorText } from "./util.js";
import { inboxHash } from "./views.js";

/** Every agent (role, module, sessions, last seen, unread) and every group with its members. */
export class AgentsView {
  constructor(app) {
    this.app = app;
    this.agentsBox = h("div", { class: "table-wrap" });
    this.groupsBox = h("div", { class: "table-wrap" });
    this.el = h("section", { class: "view agents", "aria-label": "Agents and groups" },
      h("header", { class: "view-head" }, h("h2", {}, "Agents")), this.agentsBox,
      h("header", { class: "view-head" }, h("h2", {}, "Groups")), this.groupsBox);
  }

  async start() {
    this.lastSeen = new Map();
    this.renderAgents();
    await Promise.all([this.loadSessions(), this.loadGroups()]);
  }

  /** Last seen: the newest heartbeat, session start or end (liveness is not in the log). */
  async loadSessions() {
    let sessions = [];
    try {
      sessions = (await this.app.rpc.call("session.list")).sessions || [];
    } catch (err) {
      return;
    }
    const seen = new Map();
    for (const s of sessions) {
      for (const t of [s.last_seen_at, s.started_at, s.ended_at]) {
        if (t && (!seen.has(s.agent_id) || t > seen.get(s.agent_id))) seen.set(s.agent_id, t);
      }
    }
    this.lastSeen = seen;
    this.renderAgents();
  }

  destroy() {}

  renderAgents() {
    const rows = [...this.app.agents.values()].map((a) => {
      const c = this.app.counts.get(a.agent_id);
      return h("tr", { dataset: { agent: a.agent_id } },
        h("td", {}, h("a", { href: inboxHash(a.agent_id, {}), class: "author" }, "@" + a.agent_id),
          a.display ? h("div", { class: "sub" }, a.display) : null),
        h("td", {}, a.kind === "user" ? "human" : "agent"),
        h("td", {}, a.role),
        h("td", {}, a.module || "—"),
        h("td", { class: a.active_sessions ? "active" : "idle" },
          a.active_sessions ? `${a.active_sessions} active` : "none"),
        this.lastSeenCell(a),
        h("td", { class: "num" }, c ? String(c.unread) : "…"));
    });
    fill(this.agentsBox, rows.length
      ? h("table", { class: "grid" },
        h("thead", {}, h("tr", {}, ["name", "kind", "role", "module", "sessions", "last seen", "unread"].map((t) => h("th", {}, t)))),
        h("tbody", {}, rows))
      : h("p", { class: "list-status" }, "No agents yet: thrum quickstart --name NAME --role ROLE"));
  }

  lastSeenCell(a) {
    const fromSessions = this.lastSeen ? this.lastSeen.get(a.agent_id) : null;
    const t = [a.last_seen_at, fromSessions].filter(Boolean).sort().pop();
    return h("td", { title: t || "" }, t ? ago(t) : "never");
  }

  async loadGroups() {
    try {
      const { groups } = await this.app.rpc.call("group.list");
      const infos = await Promise.all(groups.map((g) => this.app.rpc.call("group.info", { name: g.name })
        .then((r) => r.group).catch(() => ({ ...g, members: [] }))));
      fill(this.groupsBox, h("table", { class: "grid" },
        h("thead", {}, h("tr", {}, ["group", "description", "members"].map((t) => h("th", {}, t)))),
        h("tbody", {}, infos.map((g) => h("tr", { dataset: { group: g.name } },
          h("td", {}, "@" + g.name, g.builtin ? h("span", { class: "badge" }, "built-in") : null),
          h("td", {}, g.description || "—"),
          h("td", {}, g.builtin ? `every agent (${g.member_count})`
            : (g.members || []).map((m) => (m.type === "role" ? `role ${m.value}` : "@" + m.value)).join(", ") || "—"))))));
    } catch (err) {
      fill(this.groupsBox, h("p", { class: "list-status" }, `could not load groups: ${errorText(err)}`));
    }
  }

  onNote(method) {
    if (method.startsWith("group.")) this.loadGroups();
  }

  onAgents() {
    this.renderAgents();
    this.loadSessionsSoon();
  }

  loadSessionsSoon() {
    clearTimeout(this.sessionsTimer);
    this.sessionsTimer = setTimeout(() => this.loadSessions(), 300);
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
    this.timer = null;
  }

  async start() {
    await this.refresh();
    // Timer syncs change "last success" without any event to push: look again now and then.
    this.timer = setInterval(() => this.refresh(), 15000);
  }

  destroy() {
    clearInterval(this.timer);
  }

  async refresh() {
    let s;
    try {
      s = await this.app.rpc.call("sync.status");
    } catch (err) {
      fill(this.box, h("p", { class: "error" }, `sync status unavailable: ${errorText(err)}`));
      return;
    }
    this.app.setSyncBadge(s);
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
      ...(s.name_conflicts || []).map((c) =>
        row(`name conflict @${c.name}`, c.message, c.open ? "error" : "")),
      row("trust", s.team && s.team.trust === "team-root"
        ? `team root (${s.team.policy} policy; ${s.team.source || ""})`
        : "trust on first use (no team root)"),
      ...((s.team && s.team.retired) || []).map((r) =>
        row(`retired key @${r.name}`, `${r.key.slice(0, 12)}… ${r.why}`, "error")),
      ...Object.entries((s.team && s.team.rotations) || {}).flatMap(([name, m]) =>
        Object.entries(m).map(([old, to]) =>
          row(`rotated key @${name}`, `${old.slice(0, 12)}… → ${to.to.slice(0, 12)}… at ${to.at}`)))))));
  }

  async syncNow() {
    this.button.disabled = true;
    this.button.textContent = "Syncing…";
    this.result.textContent = "";
    try {
      const r = await this.app.rpc.call("sync.run");
      this.result.className = "sync-result " + (r.ok === false ? "error" : "ok");
      this.result.textContent = r.ok === false
        ? `sync failed: ${r.error || "unknown error"}`
        : `synced in ${r.duration_ms ?? "?"} ms: sent ${r.sent ?? 0}, received ${r.received ?? 0}`;
    } catch (err) {
      this.result.className = "sync-result error";
      this.result.textContent = `sync failed: ${errorText(err)}`;
      toast(`sync failed: ${errorText(err)}`, "error");
    } finally {
      this.button.disabled = false;
      this.button.textContent = "Sync now";
      await this.refresh();
    }
  }

  onNote(method) {
    if (method.startsWith("message.") || method.startsWith("agent.")) this.refreshSoon();
  }

  refreshSoon() {
    clearTimeout(this.soon);
    this.soon = setTimeout(() => this.refresh(), 500);
  }
}
