// Review shortcuts: j/k move between cards, a approve, r reject, e edit, x tick.
(function () {
  function cards() { return Array.from(document.querySelectorAll(".review-card")); }
  function current() { return document.activeElement && document.activeElement.closest(".review-card"); }
  function focusAt(i) { var list = cards(); if (list.length) { list[Math.max(0, Math.min(i, list.length - 1))].focus(); } }
  var lastIndex = 0;
  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    // Escape leaves an open editor on a card: it closes and the card takes
    // the focus back, so j/k move between cards again instead of typing into the textarea.
    if (event.key === "Escape") {
      var editor = event.target.closest && event.target.closest(".review-card details[open]");
      if (editor) { editor.open = false; editor.closest(".review-card").focus(); event.preventDefault(); }
      return;
    }
    var tag = (event.target.tagName || "").toLowerCase();
    if (tag === "input" || tag === "textarea" || tag === "select") return;
    var card = current(), list = cards(), index = card ? list.indexOf(card) : -1;
    if (event.key === "j") { focusAt(index + 1); }
    else if (event.key === "k") { focusAt(index < 0 ? 0 : index - 1); }
    else if (!card) { return; }
    else if (event.key === "a") { lastIndex = index; card.querySelector('[data-key="a"]').click(); }
    else if (event.key === "r") { lastIndex = index; card.querySelector('[data-key="r"]').click(); }
    else if (event.key === "x") {
      var box = card.querySelector('input[type=checkbox]');
      if (box) { box.checked = !box.checked; box.dispatchEvent(new Event("change", {bubbles: true})); }
    }
    else if (event.key === "e") {
      var details = card.querySelector(".edit-approve"); if (!details) return; details.open = true;
      details.querySelector("textarea").focus();
    } else { return; }
    event.preventDefault();
  });
  // A consolidation proposal whose memories changed since it was made is refused (409) and has
  // left the queue; the server names its card, which says so in place and loses its buttons.
  document.addEventListener("proposal-stale", function (event) {
    var card = document.getElementById(event.detail.card);
    if (!card) return;
    card.classList.add("stale");
    // The buttons go once htmx is done with the request: its form must still be in the page when
    // htmx fires the error event that flashes the message.
    setTimeout(function () {
      card.querySelectorAll(".rc-actions, input[type=checkbox]").forEach(function (part) { part.remove(); });
    }, 0);
    var note = document.createElement("p");
    note.className = "msg error small stale-note";
    note.setAttribute("role", "status");
    note.textContent = event.detail.message;
    card.querySelector(".rc-main").appendChild(note);
    var count = document.getElementById("consolidation-count");
    if (count && typeof event.detail.count === "number") count.textContent = event.detail.count;
  });
  // After a card is approved or rejected, keep the reviewer's place in the queue.
  document.body.addEventListener("htmx:afterSettle", function () {
    if (!current() && cards().length && document.activeElement === document.body) focusAt(lastIndex);
  });
})();
