// The break pass's one-click changes: each control of the fleet's scenario
// (policy, standby, batch-time variability, QPS, duration, scheduled faults) is a
// row of toggle buttons; the pressed ones become the run's overrides, in the
// KEY=VALUE form the run API takes. The server builds the controls from the
// scenario (config.fleet.breakControls).

import { el } from "../lib/api.js";

export class ChangeControls {
  constructor(label, spec) {
    this.spec = spec || { controls: [] };
    this.pressed = new Map(); // control key -> option index
    this.buttons = [];
    this.onChange = () => {};
    const rows = this.spec.controls.map((control) => el("div", { class: "change-row", role: "group", "aria-label": `${label} ${control.label}` },
      el("span", { class: "change-label" }, control.label),
      control.options.map((option, i) => {
        const b = el("button", {
          type: "button", class: "chip", "aria-pressed": "false",
          dataset: { key: control.key, option: String(i) },
          title: option.overrides.join("; "),
          onclick: () => this.toggle(control.key, i),
        }, option.label);
        this.buttons.push(b);
        return b;
      })));
    this.node = el("div", { class: "change-controls" }, rows.length
      ? [el("span", { class: "muted" }, "Change for this run (one click each; click again to undo):"), ...rows]
      : []);
  }

  toggle(key, index) {
    if (this.pressed.get(key) === index) this.pressed.delete(key);
    else this.pressed.set(key, index);
    this.draw();
    this.onChange();
  }

  draw() {
    for (const b of this.buttons) {
      const on = this.pressed.get(b.dataset.key) === Number(b.dataset.option);
      b.setAttribute("aria-pressed", on ? "true" : "false");
    }
  }

  /** The overrides the pressed buttons stand for. */
  overrides() {
    const out = [];
    for (const control of this.spec.controls) {
      const i = this.pressed.get(control.key);
      if (i !== undefined) out.push(...control.options[i].overrides);
    }
    return out;
  }

  /** Press the options whose overrides are all in ``wanted``; return those left over. */
  apply(wanted) {
    this.pressed.clear();
    let rest = [...wanted];
    for (const control of this.spec.controls) {
      control.options.forEach((option, i) => {
        if (option.overrides.every((o) => rest.includes(o))) {
          this.pressed.set(control.key, i);
          rest = rest.filter((o) => !option.overrides.includes(o));
        }
      });
    }
    this.draw();
    return rest;
  }

  setDisabled(disabled) {
    for (const b of this.buttons) b.disabled = disabled;
  }
}

/** The changed keys of a run as one line: "as written" when none. */
export function changedKeysText(overrides) {
  return overrides && overrides.length ? `changed: ${overrides.join(" · ")}` : "as written in the fleet config";
}
