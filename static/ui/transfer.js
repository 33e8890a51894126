// Export/import page: show the upload's progress while htmx sends the file (our own code).
(function () {
  "use strict";
  var form = document.getElementById("import-form");
  var bar = document.getElementById("import-progress");
  if (!form || !bar) return;
  form.addEventListener("htmx:xhr:progress", function (event) {
    if (!event.detail.lengthComputable) return;
    bar.hidden = false;
    bar.value = Math.round(event.detail.loaded / event.detail.total * 100);
  });
  form.addEventListener("htmx:afterRequest", function () { bar.hidden = true; bar.value = 0; });
})();
