// MemoryHub UI glue (our own, no library): show refused htmx actions in the live region.
(function () {
  "use strict";
  function flash(text, kind) {
    var box = document.getElementById("flash");
    if (!box) return;
    var p = document.createElement("p");
    p.className = "msg " + (kind || "error");
    p.textContent = text;
    box.replaceChildren(p);
  }
  document.addEventListener("htmx:responseError", function (event) {
    var xhr = event.detail.xhr;
    var type = xhr.getResponseHeader("Content-Type") || "";
    var text = type.indexOf("text/plain") === 0 && xhr.responseText ? xhr.responseText
      : xhr.status === 403 ? "Your role does not allow that." : "The server answered " + xhr.status + ".";
    flash(text, "error");
  });
  document.addEventListener("htmx:sendError", function () {
    flash("Could not reach the server. Check your connection and try again.", "error");
  });
})();

// Behaviour that would otherwise be inline handlers (the CSP allows no inline script):
// a select that submits its form when changed, and a field that selects itself on focus.
document.addEventListener("change", function (event) {
  if (event.target.matches("select[data-submit-on-change]")) event.target.form.submit();
});
document.addEventListener("focusin", function (event) {
  if (event.target.matches("[data-select-on-focus]")) event.target.select();
});
