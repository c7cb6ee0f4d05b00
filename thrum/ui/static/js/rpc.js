// JSON-RPC 2.0 over the daemon's WebSocket, that heals itself.
//
// The handshake carries both halves of the session: the browser adds the
// HttpOnly cookie; this script offers the page key (kept in sessionStorage,
// never sent anywhere else) as the subprotocol "thrum-key.<key>".
//
// When the socket drops (daemon restart, laptop lid, network) it asks the UI's
// server about its session and tries again, forever, backing off to 2 s: the
// daemon comes back on the same UI port and the same session stays valid. A
// daemon that came back with another WebSocket port means a reload (the page's
// Content-Security-Policy names the port). A heartbeat every 30 s notices a
// socket that died silently (a sleep). Events:
//   "state"  detail: "connecting" | "live" | "reconnecting" | "expired"
//   "open"   the socket is (re)connected and ready for calls
//   "note"   detail: {method, params} — a notification from the daemon

export class RpcError extends Error {
  constructor(error) {
    super(error.message || "error");
    this.code = error.code;
    this.data = error.data;
  }
}

const KEY = "thrum.key";
const BACKOFF_MS = [250, 500, 1000, 2000];   // a local daemon: trying is cheap, and it is back within seconds
const HEARTBEAT_MS = 30000;
const HEARTBEAT_TIMEOUT_MS = 10000;
const CONNECT_TIMEOUT_MS = 8000;   // a handshake nobody answers (another program on the port) is given up

/** The page key: from the login's fragment (#key=S.K) into sessionStorage, out of the address. */
export function takeKey() {
  const m = location.hash.match(/^#key=([A-Za-z0-9_.~-]+)$/);
  if (m) {
    sessionStorage.setItem(KEY, m[1]);
    history.replaceState(null, "", location.pathname + location.search + "#/feed");
  }
  return sessionStorage.getItem(KEY);
}

export class Rpc extends EventTarget {
  constructor(port, key) {
    super();
    this.port = Number(port);
    this.key = key;
    this.session = key ? key.slice(0, key.lastIndexOf(".")) : "";
    this.ws = null;
    this.nextId = 1;
    this.pending = new Map();
    this.state = "connecting";
    this.attempt = 0;
    this.timer = null;
    this.beat = null;
    this.waiting = [];          // resolvers of calls made while not connected
  }

  connect() {
    clearTimeout(this.timer);
    if (!this.key) {
      this.setState("expired");
      return;
    }
    const ws = new WebSocket(`ws://${location.hostname}:${this.port}/ws`, ["thrum", `thrum-key.${this.key}`]);
    this.ws = ws;
    let opened = false;
    const giveUp = setTimeout(() => { if (this.ws === ws && !opened) this.lost(false); }, CONNECT_TIMEOUT_MS);
    ws.onopen = () => {
      clearTimeout(giveUp);
      if (this.ws !== ws) return;
      opened = true;
      this.attempt = 0;
      this.setState("live");
      this.dispatchEvent(new Event("open"));
      for (const resolve of this.waiting.splice(0)) resolve();
      clearInterval(this.beat);
      this.beat = setInterval(() => this.heartbeat(), HEARTBEAT_MS);
    };
    ws.onmessage = (ev) => { if (this.ws === ws) this.receive(ev.data); };
    ws.onclose = () => {
      clearTimeout(giveUp);
      if (this.ws === ws) this.lost(opened);
    };
  }

  /** The socket is gone (closed, or found dead): fail what waits for it and try again. */
  lost(wasOpen) {
    const ws = this.ws;
    this.ws = null;
    clearInterval(this.beat);
    if (ws && ws.readyState <= WebSocket.OPEN) {
      try { ws.close(); } catch (e) { /* already closing */ }
    }
    for (const { reject } of this.pending.values()) reject(new RpcError({ code: -32000, message: "connection to the daemon lost" }));
    this.pending.clear();
    if (this.state !== "expired") this.retry(wasOpen);
  }

  async retry(wasOpen) {
    clearTimeout(this.timer);
    // Tell "signed out" (the page's server says so) from "daemon away" (no answer at all).
    let session = null;
    try {
      const resp = await fetch(`/api/session?s=${encodeURIComponent(this.session)}`, { cache: "no-store", credentials: "same-origin" });
      session = await resp.json();
    } catch (e) {
      session = null;
    }
    if (session && !session.authenticated) {
      this.setState("expired");
      return;
    }
    if (session && session.ws_port && session.ws_port !== this.port) {
      location.reload();            // the daemon came back elsewhere: a fresh page knows where
      return;
    }
    this.setState(wasOpen || this.attempt > 0 ? "reconnecting" : "connecting");
    const delay = BACKOFF_MS[Math.min(this.attempt, BACKOFF_MS.length - 1)];
    this.attempt += 1;
    this.timer = setTimeout(() => this.connect(), delay);
  }

  /** Look now (the tab became visible, the network came back): reconnect or check the socket. */
  wake() {
    if (this.state === "reconnecting" || this.state === "connecting") {
      if (!this.ws) {
        this.attempt = 0;
        this.connect();
      }
    } else if (this.state === "live") {
      this.heartbeat();
    }
  }

  async heartbeat() {
    const ws = this.ws;
    if (!ws || ws.readyState !== WebSocket.OPEN) return;
    try {
      await this.call("health", {}, { timeout: HEARTBEAT_TIMEOUT_MS });
    } catch (err) {
      if (this.ws === ws && err.code === -32001) this.lost(true);   // no answer: the socket is dead
    }
  }

  setState(state) {
    if (this.state === state) return;
    this.state = state;
    this.dispatchEvent(new CustomEvent("state", { detail: state }));
  }

  receive(raw) {
    let msg;
    try {
      msg = JSON.parse(raw);
    } catch (e) {
      return;
    }
    for (const m of Array.isArray(msg) ? msg : [msg]) {
      if (m && m.method && m.id === undefined) {
        this.dispatchEvent(new CustomEvent("note", { detail: { method: m.method, params: m.params || {} } }));
        continue;
      }
      const waiter = m && this.pending.get(m.id);
      if (!waiter) continue;
      this.pending.delete(m.id);
      clearTimeout(waiter.timer);
      if (m.error) waiter.reject(new RpcError(m.error));
      else waiter.resolve(m.result);
    }
  }

  /** Call a method; waits for the connection when it is down. Rejects with RpcError. */
  async call(method, params = {}, { timeout = 0 } = {}) {
    if (this.state === "expired") throw new RpcError({ code: -32000, message: "signed out: run `thrum ui` again" });
    while (!this.ws || this.ws.readyState !== WebSocket.OPEN) {
      await new Promise((resolve) => this.waiting.push(resolve));
    }
    const id = this.nextId++;
    if (this.onCall) this.onCall(method, params);
    return new Promise((resolve, reject) => {
      const waiter = { resolve, reject, timer: null };
      if (timeout) {
        waiter.timer = setTimeout(() => {
          this.pending.delete(id);
          reject(new RpcError({ code: -32001, message: `no answer to ${method} within ${timeout / 1000} s` }));
        }, timeout);
      }
      this.pending.set(id, waiter);
      this.ws.send(JSON.stringify({ jsonrpc: "2.0", id, method, params }));
    });
  }
}
