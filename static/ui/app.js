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

// Bulk bars, so a bulk action never applies by surprise: a form[data-bulk] shows only while one of its boxes
// (checkboxes with form="<its id>") is ticked, says how many, and a select-all box
// (data-select-all="<its id>") ticks them all and counts them (data-select-all-count). Parts marked data-show-for="<action>" show,
// and their selects become required, only while that action is chosen.
(function () {
  "use strict";
  function boxes(form) {
    return Array.from(document.querySelectorAll('input[type=checkbox][name=ids][form="' + form.id + '"]'));
  }
  function sync(form) {
    var all = boxes(form), ticked = all.filter(function (box) { return box.checked; }).length;
    form.hidden = ticked === 0;
    var count = form.querySelector("[data-bulk-count]");
    if (count) count.textContent = ticked + " ticked";
    var master = document.querySelector('[data-select-all="' + form.id + '"]');
    if (master) {
      master.checked = ticked > 0 && ticked === all.length;
      master.indeterminate = ticked > 0 && ticked < all.length;
      // Cards approved or rejected one by one leave the page: the label counts what is left.
      var label = master.closest("label"), shown = label && label.querySelector("[data-select-all-count]");
      if (shown) shown.textContent = all.length;
      if (label && label.parentElement) label.parentElement.hidden = all.length === 0;
    }
    var action = form.querySelector("select[name=action]");
    form.querySelectorAll("[data-show-for]").forEach(function (part) {
      var shown = !!action && action.value === part.getAttribute("data-show-for");
      part.hidden = !shown;
      part.querySelectorAll("select").forEach(function (select) { select.required = shown; });
    });
  }
  function syncAll() { document.querySelectorAll("form[data-bulk]").forEach(sync); }
  document.addEventListener("change", function (event) {
    var target = event.target;
    var master = target.closest && target.closest("[data-select-all]");
    if (master) {
      var form = document.getElementById(master.getAttribute("data-select-all"));
      if (form) boxes(form).forEach(function (box) { box.checked = master.checked; });
    }
    if (master || target.matches("input[name=ids][form], form[data-bulk] select")) syncAll();
  });
  document.addEventListener("DOMContentLoaded", syncAll);
  document.addEventListener("htmx:afterSettle", syncAll);
})();
