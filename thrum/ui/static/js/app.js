// The page: connection (and what it says about itself), routing, the sidebar of
// inboxes with live unread counts, the sync banner, and notification dispatch.
//
// Routes: #/feed, #/inbox/NAME?filters, #/mentions, #/threads, #/agents, #/sync,
// #/search?q=…, and the permalinks #/m/ID (a message in its thread) and #/t/ID.
//
// Presence: the page is a watcher. Its connection is an observer (thrum.daemon.ws),
// so none of its calls marks an agent as seen; see docs/design/ui.md.

import { Rpc, takeKey } from "./rpc.js";
import { FeedView, InboxView, MentionsView, SentView } from "./views.js";
import { AgentsView, SyncView, ThreadsView } from "./panels.js";
import { SearchView } from "./search.js";
import { ThreadPane } from "./thread.js";
import { renderMessage } from "./messages.js";
import { deliveryBlock } from "./delivery.js";
import { ComposeDialog, IdentityDialog, EditDialog, ask } from "./compose.js";
import { installKeys } from "./keys.js";
import { Notifier } from "./notify.js";
import { StatusBoard, chainLines } from "./status.js";
import { h, fill, debounce, toast, errorText, shortTime, icon, presenceText } from "./util.js";

const ME_KEY = "thrum.me";
const DENSITY_KEY = "thrum.density";
const TICK_MS = 30000;
const CONN_TEXT = {
  connecting: "connecting…", live: "live", reconnecting: "reconnecting…", expired: "signed out",
};

class App {
  constructor() {
    const port = document.querySelector('meta[name="thrum-ws-port"]').content;
    this.calls = [];                 // the page's recent calls, read by the browser tests
    this.rpc = new Rpc(port, takeKey());
    this.rpc.onCall = (method, params) => {
      this.calls.push({ method, params });
      if (this.calls.length > 5000) this.calls.splice(0, 1000);
    };
    this.scroller = document.getElementById("main");
    this.agents = new Map();
    this.groups = [];
    this.counts = new Map();
    this.mentions = null;            // the human's unread mentions {total, unread}
    this.sync = null;
    this.me = localStorage.getItem(ME_KEY) || null;
    this.dense = localStorage.getItem(DENSITY_KEY) === "compact";
    this.view = null;
    this.viewKey = null;
    this.lastEventId = null;
    this.subscribed = false;
    this.toast = toast;
    // read by the browser tests and the benchmark
    this.perf = { firstFeedRender: null, onScreen: {}, calls: this.calls, tick: () => this.tick() };
    window.__thrum = this.perf;
    this.thread = new ThreadPane(this, document.getElementById("thread"));
    this.compose = new ComposeDialog(this, document.getElementById("compose"));
    this.identity = new IdentityDialog(this, document.getElementById("identity"));
    this.edit = new EditDialog(this, document.getElementById("edit"));
    this.notifier = new Notifier(this, document.getElementById("notify-button"));
    this.status = new StatusBoard(document.getElementById("banner"));   // problems shown above every view
    this.countsSoon = debounce(() => this.loadCounts(), 150);
    this.agentsSoon = debounce(() => this.loadAgents(), 200);
    this.groupsSoon = debounce(() => this.loadGroups(), 200);
    this.syncSoon = debounce(() => this.syncStatus(), 1000);
  }

  start() {
    document.body.classList.toggle("dense", this.dense);
    document.getElementById("density-button").setAttribute("aria-pressed", String(this.dense));
    document.getElementById("notify-button").append(icon("bell"));
    document.getElementById("density-button").append(icon("rows"));
    const top = document.querySelector("header.top");
    new ResizeObserver(() => document.documentElement.style.setProperty("--top-h", `${top.offsetHeight}px`)).observe(top);
    this.rpc.addEventListener("state", (ev) => this.showState(ev.detail));
    this.rpc.addEventListener("open", () => this.onOpen());
    this.rpc.addEventListener("note", (ev) => this.onNote(ev.detail.method, ev.detail.params));
    document.getElementById("compose-button").addEventListener("click", () => this.compose.open());
    document.getElementById("me-button").addEventListener("click", () => this.chooseIdentity());
    document.getElementById("density-button").addEventListener("click", () => this.toggleDensity());
    document.getElementById("menu-toggle").addEventListener("click", () => document.body.classList.toggle("nav-open"));
    document.getElementById("sidebar").addEventListener("click", (ev) => {
      if (ev.target.closest("a")) document.body.classList.remove("nav-open");
    });
    const search = document.getElementById("search");
    search.addEventListener("submit", (ev) => ev.preventDefault());
    search.q.addEventListener("input", () => this.searchFor(search.q.value));
    search.q.addEventListener("keydown", (ev) => {
      if (ev.key === "Escape") search.q.blur();
      if (ev.key === "Enter" && this.view && this.view.openFirst) { ev.preventDefault(); this.view.openFirst(); }
    });
    installKeys(this);
    window.addEventListener("hashchange", () => this.route());
    document.addEventListener("visibilitychange", () => { if (!document.hidden) this.rpc.wake(); });
    window.addEventListener("online", () => this.rpc.wake());
    setInterval(() => this.tick(), TICK_MS);
    this.showMe();
    this.showState(this.rpc.state);
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
    this.syncStatus();
    // back without a resume point: what happened meanwhile is unknown, so read the view again
    if (reconnect && !resume) this.route(true);
  }

  showState(state) {
    document.body.dataset.conn = state;
    const el = document.getElementById("conn");
    el.dataset.state = state;
    el.querySelector(".conn-text").textContent = CONN_TEXT[state] || state;
    el.title = state === "live" ? "connected to the daemon: updates arrive as they happen"
      : state === "expired" ? "this tab's session has ended" : "the daemon is not reachable; retrying";
    if (state === "expired") {
      this.view = null;
      this.viewKey = null;
      fill(document.getElementById("main"), h("section", { class: "notice" },
        h("h2", {}, "Signed out"),
        h("p", {}, "This tab's session has ended (it was signed out with ", h("code", {}, "thrum ui --sign-out"),
          ", it is older than 7 days, or this tab never had one). Run ", h("code", {}, "thrum ui"),
          " in the repository and open the new URL.")));
    }
  }

  onNote(method, p) {
    if (p.event_id && method !== "thread.updated") this.lastEventId = p.event_id;
    if (method === "notification.dropped") {
      toast(`missed ${p.dropped} updates; reloading`, "error");
      this.route(true);
      this.countsSoon();
      return;
    }
    if (method.startsWith("agent.")) this.agentsSoon();
    if (method.startsWith("group.")) this.groupsSoon();
    if (method === "message.create" || method === "message.delete" || method === "message.read"
      || method === "message.unread" || method === "message.archive" || method === "message.acked") this.countsSoon();
    if (method === "message.create") {
      this.notifier.onCreate(p);
      if (!p.replay) this.syncSoon();             // pending events changed
    }
    if (this.view && this.view.onNote) this.view.onNote(method, p);
    this.thread.onNote(method, p);
  }

  /** What the page does every 30 s: the sync state (timer syncs push no event), statuses and relative times. */
  async tick() {
    await this.syncStatus();
    this.agentsSoon();  // statuses age (active -> idle -> offline) with no event to say so
    if (this.view && this.view.onTick) this.view.onTick();
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
    const calls = names.map((n) => this.rpc.call("message.counts", { caller: n }).catch(() => null));
    if (this.me) {
      calls.push(this.rpc.call("message.counts", { caller: this.me, mentions: true }).catch(() => null));
      calls.push(this.rpc.call("message.sent", { caller: this.me, unacked: true, page_size: 1 }).catch(() => null));
    }
    const results = await Promise.all(calls);
    names.forEach((n, i) => { if (results[i]) this.counts.set(n, results[i]); });
    this.mentions = this.me ? results[names.length] : null;
    this.unacked = this.me && results[names.length + 1] ? results[names.length + 1].total : 0;
    this.renderCounts();
    if (this.view && this.view.showCounts) this.view.showCounts();
    if (this.view && this.view.onAgents) this.view.onAgents();
  }

  fillAddresses() {
    const roles = new Set([...this.agents.values()].map((a) => a.role).filter(Boolean));
    const names = new Set(["everyone", ...this.agents.keys(), ...roles, ...this.groups.map((g) => g.name)]);
    fill(document.getElementById("address-options"), [...names].sort().map((n) => h("option", { value: "@" + n })));
  }

  async syncStatus() {
    const seq = (this.syncSeq = (this.syncSeq || 0) + 1);
    let s = null;
    try {
      s = await this.rpc.call("sync.status");
    } catch (err) {
      return null;
    }
    if (seq < (this.syncShown || 0)) return this.sync;     // a later answer is on screen already
    this.syncShown = seq;
    this.sync = s;
    this.showSync(s);
    if (this.view && this.view.onSync) this.view.onSync(s);
    return s;
  }

  /** A failing sync, a name claimed twice and a writer's broken chain are visible in every view: the sidebar's badge and the status board. */
  showSync(s) {
    const conflicts = (s.name_conflicts || []).filter((c) => c.open);
    const bad = Boolean(s.last_error) || conflicts.length > 0;
    const badge = document.getElementById("sync-badge");
    badge.className = "badge " + (bad ? "error" : "");
    badge.textContent = bad ? "!" : s.pending_events ? String(s.pending_events) : "";
    this.status.set("sync", s.last_error ? [{
      level: "error", title: "Sync is failing", href: "#/sync", link: "Sync details",
      text: `${s.last_error}${s.last_error_at ? ` (since ${shortTime(s.last_error_at)})` : ""}.`
        + (s.pending_events ? ` ${s.pending_events} event${s.pending_events === 1 ? "" : "s"} not sent yet.` : ""),
    }] : []);
    this.status.set("names", conflicts.map((c) => ({
      level: "error", title: `Name conflict @${c.name}`, text: c.message, href: "#/sync", link: "details",
    })));
    this.status.set("chains", chainLines(s.chains || {}));
  }

  // ------------------------------------------------------------------ identity, density

  setMe(name) {
    this.me = name;
    if (name) localStorage.setItem(ME_KEY, name);
    else localStorage.removeItem(ME_KEY);
    this.showMe();
    this.renderSidebar();
    this.countsSoon();
    if (this.viewKey === "mentions" || this.viewKey === "threads" || (this.viewKey || "").startsWith("sent")) this.route(true);
    else if (this.view && this.view.list) this.view.list.repaint();   // actions depend on who you are
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

  toggleDensity() {
    this.dense = !this.dense;
    localStorage.setItem(DENSITY_KEY, this.dense ? "compact" : "comfortable");
    document.body.classList.toggle("dense", this.dense);
    document.getElementById("density-button").setAttribute("aria-pressed", String(this.dense));
  }

  kindOf(name) {
    const a = this.agents.get(name);
    return a ? a.kind : "agent";
  }

  // ------------------------------------------------------------------ messages

  /** The context message elements are drawn with (see messages.renderMessage). */
  messageContext({ showRead, reader = null, onOpen = null, inThread = false }) {
    return {
      showRead,
      kindOf: (n) => this.kindOf(n),
      displayOf: (n) => (this.agents.get(n) || {}).display || "",
      onOpen: onOpen || ((m) => this.thread.open(m.message_id)),
      actions: (m) => this.actionsFor(m, reader, inThread),
      delivery: deliveryBlock,
    };
  }

  renderMessage(m, ctx) {
    return renderMessage(m, ctx);
  }

  actionsFor(m, reader, inThread) {
    const out = [];
    const button = (text, cls, fn, title) => h("button", { type: "button", class: cls, title, onclick: fn }, text);
    if (reader) {
      out.push(button(m.is_read ? "Mark unread" : "Mark read", "mark", () => this.mark(reader, m, !m.is_read),
        `for @${reader}`));
    }
    const me = this.me;
    if (!me || m.deleted) return out;
    if (!inThread) out.push(button("Reply", "reply", () => this.thread.open(m.message_id, { reply: true })));
    if (m.agent_id === me) {
      out.push(button("Edit", "edit", () => this.edit.open(m)));
      out.push(button("Delete", "delete", () => this.remove(m)));
    } else {
      out.push(button("Archive", "archive", () => this.archive(m), `take it out of @${me}'s inbox`));
    }
    return out;
  }

  async mark(agent, m, read) {
    try {
      await this.rpc.call(read ? "message.markRead" : "message.markUnread", { caller: agent, message_ids: [m.message_id] });
    } catch (err) {
      toast(err.message, "error");
    }
  }

  async archive(m) {
    try {
      await this.rpc.call("message.archive", { caller: this.me, message_ids: [m.message_id] });
      toast(`Archived for @${this.me}`);
    } catch (err) {
      toast(errorText(err), "error");
    }
  }

  async remove(m) {
    const answer = await ask(document.getElementById("ask"), {
      title: "Delete this message?", text: "Everyone sees that it was deleted (and the reason, if you give one).",
      yes: "Delete", danger: true, input: "reason (optional)",
    });
    if (!answer) return;
    try {
      const params = { caller: this.me, message_id: m.message_id };
      if (answer.answer) params.reason = answer.answer;
      await this.rpc.call("message.delete", params);
    } catch (err) {
      toast(errorText(err), "error");
    }
  }

  markOnScreen(id) {
    requestAnimationFrame(() => {
      const keys = Object.keys(this.perf.onScreen);
      if (keys.length > 2000) delete this.perf.onScreen[keys[0]];
      this.perf.onScreen[id] = performance.timeOrigin + performance.now();
    });
  }

  // ------------------------------------------------------------------ search

  focusSearch() {
    const q = document.getElementById("search").q;
    q.focus();
    q.select();
  }

  searchFor(text) {
    const q = text.trim();
    if (!q) {
      if (this.viewKey && this.viewKey.startsWith("search")) history.back();
      return;
    }
    const hash = `#/search?q=${encodeURIComponent(q)}`;
    if (this.view instanceof SearchView) {
      history.replaceState(null, "", hash);
      this.viewKey = `search?${hash.split("?")[1]}`;     // a link to another query is another view
      this.view.query(text.trimStart());       // a space after the last word: that word is whole
    } else {
      location.hash = hash;
    }
  }

  // ------------------------------------------------------------------ routing

  go(hash) {
    if (location.hash === hash) this.route(true);
    else location.hash = hash;
  }

  route(force = false) {
    if (this.rpc.state === "expired") return;
    const hash = location.hash || "#/feed";
    const [path, query] = hash.slice(1).split("?");
    const parts = path.split("/").filter(Boolean);
    const q = new URLSearchParams(query || "");
    const permalink = (parts[0] === "m" || parts[0] === "t") && parts[1] ? decodeURIComponent(parts[1]) : null;
    let key;
    if (permalink) key = this.viewKey || "feed";
    else if (parts[0] === "inbox" && parts[1]) key = `inbox/${parts[1]}?${query || ""}`;
    else if (parts[0] === "sent") key = `sent?${query || ""}`;
    else if (parts[0] === "search") key = `search?${query || ""}`;
    else if (["agents", "sync", "mentions", "threads"].includes(parts[0])) key = parts[0];
    else key = "feed";
    if (force || key !== this.viewKey || !this.view) this.show(key, parts, q);
    if (permalink) {
      if (parts[0] === "m") {
        this.thread.open(permalink);
        if (this.view && this.view.list && this.view.list.has(permalink)) this.view.list.select(permalink);
      } else {
        this.thread.open(null, { threadId: permalink });
      }
    }
    for (const a of document.querySelectorAll("#sidebar a")) {
      const href = a.getAttribute("href");
      a.classList.toggle("current", href === "#/" + key.split("?")[0] || (key === "feed" && a.dataset.nav === "feed"));
    }
  }

  show(key, parts, q) {
    if (this.view) this.view.destroy();
    let view;
    if (key.startsWith("inbox/")) {
      view = new InboxView(this, decodeURIComponent(parts[1]),
        { mentions: q.get("mentions") === "1", unread: q.get("unread") === "1", scope: q.get("scope") || "" });
    } else if (key === "agents") view = new AgentsView(this);
    else if (key === "sync") view = new SyncView(this);
    else if (key === "mentions") view = new MentionsView(this);
    else if (key.startsWith("sent")) view = new SentView(this, { unacked: q.get("unacked") === "1" });
    else if (key === "threads") view = new ThreadsView(this);
    else if (key.startsWith("search")) view = new SearchView(this, q.get("q") || "");
    else view = new FeedView(this);
    this.view = view;
    this.viewKey = key;
    const main = this.scroller;
    main.dataset.route = location.hash || "#/feed";   // data-ready: the view's first data is on screen (tests wait for it)
    delete main.dataset.ready;
    fill(main, view.el);
    main.scrollTop = 0;
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
        h("span", { class: `dot ${a.status || "offline"}`, title: presenceText(a) }),
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
    const mine = this.me ? this.counts.get(this.me) : null;
    this.notifier.setUnread(mine ? mine.unread : 0);
    const mentions = document.getElementById("mentions-badge");
    mentions.textContent = this.mentions && this.mentions.unread ? String(this.mentions.unread) : "";
    const unacked = document.getElementById("unacked-badge");
    unacked.textContent = this.unacked ? String(this.unacked) : "";
    unacked.title = this.unacked ? `${this.unacked} of your messages wait for an acknowledgement` : "";
  }
}

new App().start();

