// Telling the human: the unread count in the tab's title, and desktop
// notifications for messages that mention them (or @human) and for critical
// ones. Desktop notifications are off until the human turns them on (one click;
// the browser then asks once); the choice is remembered in this browser.

const PREF = "thrum.notify";

export class Notifier {
  constructor(app, button) {
    this.app = app;
    this.button = button;
    this.enabled = localStorage.getItem(PREF) === "1" && this.permission() === "granted";
    this.unread = 0;
    button.addEventListener("click", () => this.toggle());
    this.show();
  }

  permission() {
    return typeof Notification === "undefined" ? "unsupported" : Notification.permission;
  }

  async toggle() {
    if (this.enabled) {
      this.enabled = false;
      localStorage.removeItem(PREF);
    } else if (this.permission() === "unsupported") {
      this.app.toast("this browser has no desktop notifications", "error");
    } else {
      const answer = this.permission() === "granted" ? "granted" : await Notification.requestPermission();
      this.enabled = answer === "granted";
      if (this.enabled) localStorage.setItem(PREF, "1");
      else this.app.toast("notifications are blocked for this page in the browser's settings", "error");
    }
    this.show();
  }

  show() {
    this.button.classList.toggle("on", this.enabled);
    this.button.setAttribute("aria-pressed", String(this.enabled));
    this.button.title = this.enabled
      ? "Desktop notifications are on (mentions of you or @human, critical messages): click to turn off"
      : "Desktop notifications are off: click to get one for mentions of you or @human and critical messages";
  }

  /** The tab's title carries the human's unread count. */
  setUnread(n) {
    this.unread = n;
    document.title = n ? `(${n}) thrum` : "thrum";
  }

  /** Whether a new message is one the human wants to hear about now. */
  wanted(p) {
    const me = this.app.me;
    if (p.replay || (me && p.agent_id === me)) return false;
    if (p.priority === "critical") return true;
    const mentions = (p.refs || []).filter((r) => r.type === "mention").map((r) => r.value.replace(/^@/, ""));
    return mentions.includes("human") || (me !== null && mentions.includes(me));
  }

  onCreate(p) {
    if (!this.enabled || !this.wanted(p)) return;
    const text = (p.subject || (p.body && p.body.content) || "").split("\n")[0].slice(0, 140);
    try {
      const n = new Notification(`@${p.agent_id}${p.priority === "critical" ? " (critical)" : ""}`, {
        body: text, tag: p.message_id,
      });
      n.onclick = () => {
        window.focus();
        this.app.go(`#/m/${encodeURIComponent(p.message_id)}`);
        n.close();
      };
    } catch (e) {
      // a browser that only notifies from a service worker: the title still counts
    }
  }
}
