// floatlab FormatCompare: the browser half. A value box; the table is HTML made in Python.

function render({ model, el }) {
  el.classList.add("floatlab-widget", "floatlab-compare-widget");
  const value = Object.assign(document.createElement("input"), {
    type: "text", className: "flt-value", spellcheck: false,
    title: "a number: 3.141, 1e-5, 2**-24, -1/3, inf, nan (Enter to compare)",
  });
  value.setAttribute("aria-label", "value");
  const submit = () => model.send({ event: "value", text: value.value });
  value.addEventListener("keydown", (e) => { if (e.key === "Enter") submit(); });
  value.addEventListener("change", submit);
  const label = document.createElement("label");
  label.append("value ", value);
  const controls = Object.assign(document.createElement("div"), { className: "flt-controls" });
  controls.append(label);
  const message = Object.assign(document.createElement("div"), { className: "flt-message" });
  message.setAttribute("role", "alert");
  const picture = Object.assign(document.createElement("div"), { className: "flt-picture" });
  el.append(controls, message, picture);

  const draw = () => { picture.innerHTML = model.get("html"); };
  const sync = () => {
    if (document.activeElement !== value) value.value = model.get("value_text");
    message.textContent = model.get("message");
  };
  draw();
  sync();
  model.on("change:html", draw);
  model.on("change:value_text", sync);
  model.on("change:message", sync);
}

export default { render };
