// The page: connection, routing (#/feed, #/inbox/NAME?filters, #/agents, #/sync),
// the sidebar of inboxes with live unread counts, and notification dispatch.

import { Rpc } from "./rpc.js";
import { FeedView, InboxView } from "./views.js";
import { AgentsView, SyncView } from "./panels.js";
import { ThreadPane } from "./thread.js";
import { ComposeDialog, IdentityDialog } from "./compose.js";
import { h, fill, debounce, toast } from "./util.js";

const ME_KEY = "thrum.me";
const CONN_TEXT = { connecting: "connecting…", live: "live", reconnecting: "reconnecting…", expired: "signed out" };

class App {
  constructor() {
    const port = document.querySelector('meta[name="thrum-ws-port"]').content;
    this.rpc = new Rpc(`ws://${location.hostname}:${port}/ws`);
    this.agents = new Map();
    this.groups = [];
    this.counts = new Map();
    this.me = localStorage.getItem(ME_KEY) || null;
    this.view = null;
    this.lastEventId = null;
    this.subscribed = false;
    // read by the browser tests and the benchmark
    this.perf = { firstFeedRender: null, onScreen: {} };
    window.__thrum = this.perf;
    this.thread = new ThreadPane(this, document.getElementById("thread"));
    this.compose = new ComposeDialog(this, document.getElementById("compose"));
    this.identity = new IdentityDialog(this, document.getElementById("identity"));
    this.countsSoon = debounce(() => this.loadCounts(), 150);
    this.agentsSoon = debounce(() => this.loadAgents(), 200);
    this.groupsSoon = debounce(() => this.loadGroups(), 200);
  }

  start() {
    this.rpc.addEventListener("state", (ev) => this.showState(ev.detail));
    this.rpc.addEventListener("open", () => this.onOpen());
    this.rpc.addEventListener("note", (ev) => this.onNote(ev.detail.method, ev.detail.params));
    document.getElementById("compose-button").addEventListener("click", () => this.compose.open());
    document.getElementById("me-button").addEventListener("click", () => this.chooseIdentity());
    document.getElementById("menu-toggle").addEventListener("click", () => document.body.classList.toggle("nav-open"));
    document.getElementById("sidebar").addEventListener("click", (ev) => {
      if (ev.target.closest("a")) document.body.classList.remove("nav-open");
    });
    document.addEventListener("keydown", (ev) => {
      if (ev.target.closest("input, textarea, select, dialog")) return;
      if (ev.key === "n" && !ev.ctrlKey && !ev.metaKey && !ev.altKey) { ev.preventDefault(); this.compose.open(); }
      if (ev.key === "Escape" && this.thread.isOpen) this.thread.close();
    });
    window.addEventListener("hashchange", () => this.route());
    this.showMe();
    this.rpc.connect();
    this.route();
  }

  // ------------------------------------------------------------------ connection

  async onOpen() {
    const reconnect = this.subscribed;          // the socket dropped and came back
    const resume = reconnect && this.lastEventId;
    const params = { filter_type: "all" };
    if (resume) params.since_event_id = this.lastEventId;
    try {
      await this.rpc.call("subscribe.create", params);
      this.subscribed = true;
    } catch (err) {
      toast(`live updates unavailable: ${err.message}`, "error");
    }
    await this.loadAgents();
    this.loadGroups();
    // back without a resume point: what happened meanwhile is unknown, so read the view again
    if (reconnect && !resume) this.route();
  }

  showState(state) {
    const el = document.getElementById("conn");
    el.dataset.state = state;
    el.textContent = CONN_TEXT[state] || state;
    if (state === "expired") {
      fill(document.getElementById("main"), h("section", { class: "notice" },
        h("h2", {}, "Signed out"),
        h("p", {}, "The daemon restarted or this session ended. Run ", h("code", {}, "thrum ui"),
          " in the repository and open the new URL.")));
    }
  }

  onNote(method, p) {
    if (p.event_id && method !== "thread.updated") this.lastEventId = p.event_id;
    if (method === "notification.dropped") {
      toast(`missed ${p.dropped} updates; reloading`, "error");
      this.route();
      this.countsSoon();
      return;
    }
    if (method.startsWith("agent.")) this.agentsSoon();
    if (method.startsWith("group.")) this.groupsSoon();
    if (method === "message.create" || method === "message.delete" || method === "message.read"
      || method === "message.unread" || method === "message.archive") this.countsSoon();
    if (this.view && this.view.onNote) this.view.onNote(method, p);
    this.thread.onNote(method, p);
  }

  // ------------------------------------------------------------------ data

  async loadAgents() {
    try {
      const { agents } = await this.rpc.call("agent.list");
      this.agents = new Map(agents.map((a) => [a.agent_id, a]));
    } catch (err) {
      toast(`could not list agents: ${err.message}`, "error");
      return;
    }
    if (this.me && !this.agents.has(this.me)) this.setMe(null);
    this.renderSidebar();
    this.fillAddresses();
    if (this.view && this.view.onAgents) this.view.onAgents();
    await this.loadCounts();
  }

  async loadGroups() {
    try {
      this.groups = (await this.rpc.call("group.list")).groups || [];
    } catch (err) {
      this.groups = [];
    }
    this.fillAddresses();
  }

  async loadCounts() {
    const names = [...this.agents.keys()];
    const results = await Promise.all(names.map((n) => this.rpc.call("message.counts", { caller: n }).catch(() => null)));
    names.forEach((n, i) => { if (results[i]) this.counts.set(n, results[i]); });
    this.renderCounts();
    if (this.view && this.view.showCounts) this.view.showCounts();
    if (this.view && this.view.onAgents) this.view.onAgents();
  }

  fillAddresses() {
    const roles = new Set([...this.agents.values()].map((a) => a.role).filter(Boolean));
    const names = new Set(["everyone", ...this.agents.keys(), ...roles, ...this.groups.map((g) => g.name)]);
    fill(document.getElementById("address-options"), [...names].sort().map((n) => h("option", { value: "@" + n })));
  }

  // ------------------------------------------------------------------ identity

  setMe(name) {
    this.me = name;
    if (name) localStorage.setItem(ME_KEY, name);
    else localStorage.removeItem(ME_KEY);
    this.showMe();
    this.renderSidebar();
    if (this.thread.isOpen && this.thread.focusId) this.thread.open(this.thread.focusId);   // reply as the new identity
  }

  showMe() {
    const b = document.getElementById("me-button");
    b.textContent = this.me ? `@${this.me}` : "Who are you?";
    b.title = this.me ? "You send and reply as this human identity (click to change)" : "Choose the identity you send as";
  }

  chooseIdentity(then) {
    this.identity.open(then);
  }

  kindOf(name) {
    const a = this.agents.get(name);
    return a ? a.kind : "agent";
  }

  /** The context message elements are drawn with (see messages.renderMessage). */
  messageContext({ showRead, reader = null, onOpen = null }) {
    const ctx = {
      showRead,
      kindOf: (n) => this.kindOf(n),
      onOpen: onOpen || ((m) => this.thread.open(m.message_id)),
      actions: null,
    };
    if (reader) {
      ctx.actions = (m) => [h("button", { type: "button", class: "mark", onclick: () => this.mark(reader, m, !m.is_read) },
        m.is_read ? "Mark unread" : "Mark read")];
    }
    return ctx;
  }

  async mark(agent, m, read) {
    try {
      await this.rpc.call(read ? "message.markRead" : "message.markUnread", { caller: agent, message_ids: [m.message_id] });
    } catch (err) {
      toast(err.message, "error");
    }
  }

  markOnScreen(id) {
    requestAnimationFrame(() => {
      const keys = Object.keys(this.perf.onScreen);
      if (keys.length > 2000) delete this.perf.onScreen[keys[0]];
      this.perf.onScreen[id] = performance.timeOrigin + performance.now();
    });
  }

  setSyncBadge(s) {
    const badge = document.getElementById("sync-badge");
    const conflict = (s.name_conflicts || []).some((c) => c.open);
    badge.className = "badge " + (s.last_error || conflict ? "error" : "");
    badge.textContent = s.last_error || conflict ? "!" : s.pending_events ? String(s.pending_events) : "";
  }

  // ------------------------------------------------------------------ routing

  go(hash) {
    if (location.hash === hash) this.route();
    else location.hash = hash;
  }

  route() {
    if (this.rpc.state === "expired") return;
    const hash = location.hash || "#/feed";
    const [path, query] = hash.slice(1).split("?");
    const parts = path.split("/").filter(Boolean);
    const q = new URLSearchParams(query || "");
    if (this.view) this.view.destroy();
    let view;
    if (parts[0] === "inbox" && parts[1]) {
      view = new InboxView(this, decodeURIComponent(parts[1]),
        { mentions: q.get("mentions") === "1", unread: q.get("unread") === "1", scope: q.get("scope") || "" });
    } else if (parts[0] === "agents") {
      view = new AgentsView(this);
    } else if (parts[0] === "sync") {
      view = new SyncView(this);
    } else {
      view = new FeedView(this);
    }
    this.view = view;
    const main = document.getElementById("main");
    main.dataset.route = hash;       // data-ready: the view's first data is on screen (tests wait for it)
    delete main.dataset.ready;
    fill(main, view.el);
    for (const a of document.querySelectorAll("#sidebar a")) {
      a.classList.toggle("current", a.getAttribute("href") === "#" + path || (path === "" && a.dataset.nav === "feed"));
    }
    const started = Promise.resolve(view.start());
    started.then(() => { if (this.view === view) main.dataset.ready = "1"; }, () => {});
    if (view instanceof FeedView && this.perf.firstFeedRender === null) {
      started.then(() => requestAnimationFrame(() => {
        if (this.perf.firstFeedRender === null) this.perf.firstFeedRender = performance.now();
      }));
    }
  }

  // ------------------------------------------------------------------ sidebar

  renderSidebar() {
    const list = document.getElementById("inbox-list");
    const agents = [...this.agents.values()].sort((a, b) =>
      (b.agent_id === this.me) - (a.agent_id === this.me) || a.agent_id.localeCompare(b.agent_id));
    fill(list, agents.map((a) => h("li", {},
      h("a", { href: `#/inbox/${encodeURIComponent(a.agent_id)}`, dataset: { inbox: a.agent_id },
        title: `${a.kind === "user" ? "human" : "agent"} · role ${a.role}${a.module ? " · module " + a.module : ""}` },
        h("span", { class: a.active_sessions ? "dot on" : "dot", title: a.active_sessions ? "active session" : "no active session" }),
        h("span", { class: "name" }, "@" + a.agent_id, a.agent_id === this.me ? h("span", { class: "you" }, " (you)") : null),
        h("span", { class: "role" }, a.role),
        h("span", { class: "unread-badge", dataset: { agent: a.agent_id } })))));
    this.renderCounts();
    const hash = location.hash.split("?")[0];
    for (const a of list.querySelectorAll("a")) a.classList.toggle("current", a.getAttribute("href") === hash);
  }

  renderCounts() {
    for (const badge of document.querySelectorAll("#inbox-list .unread-badge")) {
      const c = this.counts.get(badge.dataset.agent);
      badge.textContent = c && c.unread ? String(c.unread) : "";
      badge.title = c ? `${c.unread} unread of ${c.total}` : "";
    }
  }
}

new App().start();
