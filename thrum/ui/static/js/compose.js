// Compose (a new message to agents, roles, groups or @everyone) and the
// "who are you" dialog: the page sends as a human identity, an agent of kind
// "user" registered like any other.

import { h, fill, parseTag, toast, errorText } from "./util.js";

const PRIORITIES = ["low", "normal", "high", "critical"];

function tagsFrom(text, what) {
  const out = [];
  for (const part of (text || "").split(",").map((s) => s.trim()).filter(Boolean)) {
    const tag = parseTag(part);
    if (!tag) throw new Error(`${what} “${part}”: use type:value, e.g. module:auth`);
    out.push(tag);
  }
  return out;
}

export class ComposeDialog {
  constructor(app, dialog) {
    this.app = app;
    this.dialog = dialog;
    this.recipients = [];
  }

  open(preset = {}) {
    if (!this.app.me) {
      this.app.chooseIdentity(() => this.open(preset));
      return;
    }
    this.recipients = [...(preset.to || [])];
    this.error = h("p", { class: "error", role: "alert" });
    this.chips = h("span", { class: "chips" });
    this.toInput = h("input", { type: "text", name: "to", list: "address-options", autocomplete: "off",
      placeholder: "@agent, @role, @group or @everyone", "aria-label": "To" });
    this.toInput.addEventListener("keydown", (ev) => {
      if ((ev.key === "Enter" || ev.key === "," || ev.key === " ") && this.toInput.value.trim()) {
        ev.preventDefault();
        this.addRecipient(this.toInput.value);
      } else if (ev.key === "Backspace" && !this.toInput.value && this.recipients.length) {
        this.recipients.pop();
        this.drawChips();
      }
    });
    this.toInput.addEventListener("change", () => { if (this.toInput.value.trim()) this.addRecipient(this.toInput.value); });
    const subject = h("input", { type: "text", name: "subject", placeholder: "optional", maxlength: 4096 });
    const scope = h("input", { type: "text", name: "scope", placeholder: "module:auth", value: preset.scope || "" });
    const ref = h("input", { type: "text", name: "ref", placeholder: "issue:42" });
    const priority = h("select", { name: "priority" }, PRIORITIES.map((p) => h("option", { value: p, selected: p === "normal" }, p)));
    const body = h("textarea", { name: "content", rows: 6, required: true, placeholder: "Message, in Markdown (Ctrl+Enter sends)" });
    const send = h("button", { type: "submit", class: "primary" }, "Send");
    const cancel = h("button", { type: "button", onclick: () => this.dialog.close() }, "Cancel");
    const form = h("form", { class: "compose", method: "dialog" },
      h("header", { class: "view-head" }, h("h2", {}, "New message"), h("span", { class: "spacer" }),
        h("span", { class: "from" }, "from ", h("span", { class: "author" }, "@" + this.app.me))),
      h("label", { class: "field to-field" }, h("span", {}, "To"), h("span", { class: "chip-input" }, this.chips, this.toInput)),
      h("label", { class: "field" }, h("span", {}, "Subject"), subject),
      h("div", { class: "row wrap" },
        h("label", { class: "field" }, h("span", {}, "Scope"), scope),
        h("label", { class: "field" }, h("span", {}, "Ref"), ref),
        h("label", { class: "field" }, h("span", {}, "Priority"), priority)),
      body, this.error,
      h("div", { class: "row" }, h("span", { class: "spacer" }), cancel, send));
    const submit = async () => {
      if (this.toInput.value.trim()) this.addRecipient(this.toInput.value);
      this.error.textContent = "";
      let params;
      try {
        params = { caller: this.app.me, content: body.value, to: [...this.recipients], priority: priority.value,
          scopes: tagsFrom(scope.value, "scope"), refs: tagsFrom(ref.value, "ref") };
      } catch (err) {
        this.error.textContent = err.message;
        return;
      }
      if (!params.to.length) {
        // a message with no recipient reaches nobody's attention: say so instead of "Sent"
        this.error.textContent = "Add a recipient: an agent, a role, a group, or @everyone.";
        this.toInput.focus();
        return;
      }
      if (subject.value.trim()) params.subject = subject.value.trim();
      if (!params.content.trim()) {
        this.error.textContent = "Write a message first.";
        return;
      }
      send.disabled = true;
      try {
        const r = await this.app.rpc.call("message.send", params);
        this.dialog.close();
        const to = (r.recipients || []).map((x) => x.address).join(", ");
        toast(`Sent to ${to || params.to.map((x) => "@" + x).join(", ")}`);
      } catch (err) {
        this.error.textContent = errorText(err);
      } finally {
        send.disabled = false;
      }
    };
    form.addEventListener("submit", (ev) => { ev.preventDefault(); submit(); });
    body.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) { ev.preventDefault(); submit(); }
    });
    fill(this.dialog, form);
    this.drawChips();
    this.dialog.showModal();
    (this.recipients.length ? body : this.toInput).focus();
  }

  addRecipient(text) {
    for (const part of text.split(/[\s,]+/)) {
      const bare = part.trim().replace(/^@+/, "");
      if (bare && !this.recipients.includes(bare)) this.recipients.push(bare);
    }
    this.toInput.value = "";
    this.drawChips();
  }

  drawChips() {
    if (this.error) this.error.textContent = "";          // the recipients changed: an old complaint is stale
    fill(this.chips, this.recipients.map((r) => h("span", { class: "chip", dataset: { address: r } }, "@" + r,
      h("button", { type: "button", class: "chip-x", "aria-label": `remove @${r}`, onclick: () => {
        this.recipients = this.recipients.filter((x) => x !== r);
        this.drawChips();
      } }, "×"))));
  }
}

/** Edit one of the human's own messages. */
export class EditDialog {
  constructor(app, dialog) {
    this.app = app;
    this.dialog = dialog;
  }

  open(m) {
    const error = h("p", { class: "error", role: "alert" });
    const body = h("textarea", { name: "content", rows: 8, required: true });
    body.value = m.body.content;
    const save = h("button", { type: "submit", class: "primary" }, "Save");
    const form = h("form", { class: "compose", method: "dialog" },
      h("header", { class: "view-head" }, h("h2", {}, "Edit message"), h("span", { class: "spacer" }),
        h("span", { class: "hint" }, m.message_id)),
      body, error,
      h("div", { class: "row" }, h("span", { class: "hint" }, "Everyone sees that it was edited, and the history."),
        h("span", { class: "spacer" }),
        h("button", { type: "button", onclick: () => this.dialog.close() }, "Cancel"), save));
    const submit = async () => {
      if (!body.value.trim()) {
        error.textContent = "A message cannot be empty; delete it instead.";
        return;
      }
      save.disabled = true;
      try {
        await this.app.rpc.call("message.edit", { caller: this.app.me, message_id: m.message_id, content: body.value });
        this.dialog.close();
        toast("Edited");
      } catch (err) {
        error.textContent = errorText(err);
      } finally {
        save.disabled = false;
      }
    };
    form.addEventListener("submit", (ev) => { ev.preventDefault(); submit(); });
    body.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) { ev.preventDefault(); submit(); }
    });
    fill(this.dialog, form);
    this.dialog.showModal();
    body.focus();
  }
}

/** A yes/no question in the page's own dialog; resolves true for yes. ``input``: also ask for a line of text. */
export function ask(dialog, { title, text, yes, danger = false, input = null }) {
  return new Promise((resolve) => {
    const field = input ? h("input", { type: "text", name: "answer", placeholder: input }) : null;
    const ok = h("button", { type: "submit", class: danger ? "primary danger" : "primary" }, yes);
    const form = h("form", { class: "ask", method: "dialog" },
      h("header", { class: "view-head" }, h("h2", {}, title)), h("p", {}, text),
      field ? h("label", { class: "field" }, h("span", {}, input), field) : null,
      h("div", { class: "row" }, h("span", { class: "spacer" }),
        h("button", { type: "button", class: "cancel", onclick: () => { dialog.close(); resolve(null); } }, "Cancel"), ok));
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      dialog.close();
      resolve(field ? { answer: field.value.trim() } : true);
    });
    dialog.addEventListener("cancel", () => resolve(null), { once: true });
    fill(dialog, form);
    dialog.showModal();
    (field || ok).focus();
  });
}

export class IdentityDialog {
  constructor(app, dialog) {
    this.app = app;
    this.dialog = dialog;
  }

  open(then) {
    const humans = [...this.app.agents.values()].filter((a) => a.kind === "user");
    const error = h("p", { class: "error", role: "alert" });
    const name = h("input", { type: "text", name: "name", required: true, pattern: "[a-z0-9_]{1,64}",
      placeholder: "e.g. dana", autocomplete: "off" });
    const role = h("input", { type: "text", name: "role", required: true, pattern: "[a-z0-9_]{1,64}", value: "human" });
    const display = h("input", { type: "text", name: "display", placeholder: "Dana Scully (optional)" });
    const use = (agent) => {
      this.app.setMe(agent);
      this.dialog.close();
      if (then) then();
    };
    const form = h("form", { class: "identity", method: "dialog" },
      h("header", { class: "view-head" }, h("h2", {}, "Who are you?"), h("span", { class: "spacer" }),
        h("button", { type: "button", class: "icon close", "aria-label": "Close", onclick: () => this.dialog.close() }, "✕")),
      h("p", { class: "hint" }, "Messages from this page are sent as a human identity: registered like an agent "
        + "(kind “user”), shown with a “human” badge, and addressable by name or role."),
      humans.length ? h("div", { class: "known" }, h("span", {}, "Continue as: "),
        humans.map((a) => h("button", { type: "button", class: "use-identity", dataset: { name: a.agent_id },
          onclick: () => use(a.agent_id) }, "@" + a.agent_id))) : null,
      h("h3", {}, humans.length ? "…or register a new one" : "Register yourself"),
      h("div", { class: "row wrap" },
        h("label", { class: "field" }, h("span", {}, "Name"), name),
        h("label", { class: "field" }, h("span", {}, "Role"), role),
        h("label", { class: "field" }, h("span", {}, "Display name"), display)),
      error,
      h("div", { class: "row" },
        this.app.me ? h("button", { type: "button", onclick: () => { this.app.setMe(null); this.dialog.close(); } }, `Stop acting as @${this.app.me}`) : null,
        h("span", { class: "spacer" }), h("button", { type: "submit", class: "primary" }, "Register and continue")));
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      error.textContent = "";
      const n = name.value.trim();
      const existing = this.app.agents.get(n);
      if (existing && existing.kind !== "user") {
        error.textContent = `@${n} is an agent's name; choose another.`;
        return;
      }
      try {
        const params = { name: n, role: role.value.trim(), kind: "user" };
        if (display.value.trim()) params.display = display.value.trim();
        await this.app.rpc.call("agent.register", params);
        await this.app.loadAgents();
        use(n);
        toast(`You are @${n}`);
      } catch (err) {
        error.textContent = errorText(err);
      }
    });
    fill(this.dialog, form);
    this.dialog.showModal();
    (humans.length ? form.querySelector(".use-identity") : name).focus();
  }
}
