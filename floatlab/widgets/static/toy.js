// floatlab FloatToy: the browser half. It draws the controls, inserts the picture Python made
// (model "html") and reports what the person does as messages. It computes nothing.

function element(tag, props = {}, children = []) {
  const node = Object.assign(document.createElement(tag), props);
  for (const child of children) node.append(child);
  return node;
}

function labelled(text, control) {
  return element("label", {}, [text, control]);
}

function render({ model, el }) {
  const send = (event, extra) => model.send({ event, ...extra });
  el.classList.add("floatlab-widget", "floatlab-toy-widget");

  const value = element("input", {
    type: "text", className: "flt-value", spellcheck: false,
    title: "a number: 3.141, 1e-5, 2**-24, -1/3, inf, nan (Enter to store it)",
  });
  value.setAttribute("aria-label", "value");
  const submitValue = () => send("value", { text: value.value });
  value.addEventListener("keydown", (e) => { if (e.key === "Enter") submitValue(); });
  value.addEventListener("change", submitValue);

  const format = element("select", { className: "flt-format-select" });
  format.setAttribute("aria-label", "format");
  for (const name of model.get("formats")) format.append(element("option", { value: name, textContent: name }));
  format.append(element("option", { value: "", textContent: "custom…" }));
  const spec = element("input", {
    type: "text", className: "flt-spec", placeholder: "e3m4, e5m2fnuz…", spellcheck: false,
    title: "a custom format: e<E>m<M>[b<bias>][fn|fnuz|fn_nonan][_ftz] (Enter to use it)",
  });
  spec.setAttribute("aria-label", "custom format");
  format.addEventListener("change", () => {
    if (format.value) send("format", { text: format.value });
    else spec.focus();
  });
  spec.addEventListener("keydown", (e) => { if (e.key === "Enter") send("format", { text: spec.value }); });

  const rounding = element("select", { className: "flt-rounding" });
  rounding.setAttribute("aria-label", "rounding mode");
  for (const mode of model.get("rounding_modes")) rounding.append(element("option", { value: mode, textContent: mode }));
  rounding.addEventListener("change", () => send("rounding", { value: rounding.value }));

  const saturate = element("input", { type: "checkbox", className: "flt-saturate" });
  saturate.addEventListener("change", () => send("saturate", { value: saturate.checked }));
  const ftz = element("input", { type: "checkbox", className: "flt-ftz" });
  ftz.addEventListener("change", () => send("ftz", { value: ftz.checked }));

  const controls = element("div", {}, [
    element("div", { className: "flt-controls" }, [
      labelled("value", value), labelled("format", format), spec,
    ]),
    element("div", { className: "flt-controls" }, [
      labelled("rounding", rounding), labelled("saturate", saturate), labelled("FTZ", ftz),
    ]),
  ]);
  const message = element("div", { className: "flt-message" });
  message.setAttribute("role", "alert");
  const picture = element("div", { className: "flt-picture" });
  el.append(controls, message, picture);

  // Keyboard: one bit is in the tab order (a roving tabindex); arrows move, Space flips.
  let current = null;  // data-bit of the bit that holds the tab stop
  const bits = () => Array.from(picture.querySelectorAll("[data-bit]"));
  const focusBit = (node, focus = true) => {
    for (const b of bits()) b.tabIndex = -1;
    if (!node) return;
    node.tabIndex = 0;
    current = node.dataset.bit;
    if (focus) node.focus();
  };
  picture.addEventListener("click", (e) => {
    const box = e.target.closest("[data-bit]");
    if (!box) return;
    focusBit(box);
    send("flip", { bit: Number(box.dataset.bit) });
  });
  picture.addEventListener("keydown", (e) => {
    const box = e.target.closest("[data-bit]");
    if (!box) return;
    const all = bits();
    const i = all.indexOf(box);
    const moves = { ArrowLeft: i - 1, ArrowRight: i + 1, ArrowUp: i - 1, ArrowDown: i + 1, Home: 0, End: all.length - 1 };
    if (e.key in moves) {
      e.preventDefault();
      focusBit(all[Math.max(0, Math.min(all.length - 1, moves[e.key]))]);
    } else if (e.key === " " || e.key === "Enter") {
      e.preventDefault();
      send("flip", { bit: Number(box.dataset.bit) });
    }
  });

  function draw() {
    const hadFocus = picture.contains(document.activeElement);
    picture.innerHTML = model.get("html");
    const all = bits();
    const again = all.find((b) => b.dataset.bit === current) || all[0];
    focusBit(again, hadFocus);
  }
  function sync() {
    if (document.activeElement !== value) value.value = model.get("value_text");
    const fmt = model.get("fmt");
    const preset = model.get("formats").includes(fmt);
    format.value = preset ? fmt : "";
    if (document.activeElement !== spec) spec.value = preset ? "" : fmt;
    rounding.value = model.get("rounding");
    saturate.checked = model.get("saturate");
    ftz.checked = model.get("ftz");
    ftz.disabled = !model.get("has_subnormals");
    ftz.title = ftz.disabled ? `${fmt} has no subnormals to flush` : "flush subnormal results to zero";
    message.textContent = model.get("message");
  }

  draw();
  sync();
  model.on("change:html", draw);
  for (const name of ["value_text", "fmt", "rounding", "saturate", "ftz", "has_subnormals", "message"]) {
    model.on(`change:${name}`, sync);
  }
}

export default { render };
