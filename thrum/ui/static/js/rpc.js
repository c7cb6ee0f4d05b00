// JSON-RPC 2.0 over the daemon's WebSocket, with reconnects.
//
// The browser sends the UI's session cookie with the handshake (same site,
// HttpOnly: this script never sees it). Events:
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

const BACKOFF_MS = [250, 500, 1000, 2000, 5000];

export class Rpc extends EventTarget {
  constructor(url) {
    super();
    this.url = url;
    this.ws = null;
    this.nextId = 1;
    this.pending = new Map();
    this.state = "connecting";
    this.attempt = 0;
    this.waiting = [];          // resolvers of calls made while not connected
  }

  connect() {
    const ws = new WebSocket(this.url);
    this.ws = ws;
    let opened = false;
    ws.onopen = () => {
      opened = true;
      this.attempt = 0;
      this.setState("live");
      this.dispatchEvent(new Event("open"));
      for (const resolve of this.waiting.splice(0)) resolve();
    };
    ws.onmessage = (ev) => this.receive(ev.data);
    ws.onclose = () => {
      for (const { reject } of this.pending.values()) reject(new RpcError({ code: -32000, message: "connection to the daemon lost" }));
      this.pending.clear();
      if (this.ws !== ws || this.state === "expired") return;
      this.retry(opened);
    };
  }

  async retry(wasOpen) {
    // Tell "signed out / daemon restarted" (the page's server says so) from "daemon away".
    let session = null;
    try {
      const resp = await fetch("/api/session", { cache: "no-store", credentials: "same-origin" });
      session = await resp.json();
    } catch (e) {
      session = null;
    }
    if (session && !session.authenticated) {
      this.setState("expired");
      return;
    }
    this.setState(wasOpen || this.attempt > 0 ? "reconnecting" : "connecting");
    const delay = BACKOFF_MS[Math.min(this.attempt, BACKOFF_MS.length - 1)];
    this.attempt += 1;
    setTimeout(() => this.connect(), delay);
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
      if (m.error) waiter.reject(new RpcError(m.error));
      else waiter.resolve(m.result);
    }
  }

  /** Call a method; waits for the connection when it is down. Rejects with RpcError. */
  async call(method, params = {}) {
    if (this.state === "expired") throw new RpcError({ code: -32000, message: "signed out: run `thrum ui` again" });
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN) {
      await new Promise((resolve) => this.waiting.push(resolve));
    }
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.ws.send(JSON.stringify({ jsonrpc: "2.0", id, method, params }));
    });
  }
}
