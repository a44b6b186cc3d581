// The dashboard's one script: live updates. A page that has live regions names its event
// stream in `data-live`; each update carries regions by element id, with a key, and a
// region is replaced only when its key differs from the one on the page (a question's
// form keeps what was typed while the same questions stay open).
"use strict";
(function () {
  const main = document.querySelector("main[data-live]");
  if (!main || !window.EventSource) return;
  const source = new EventSource(main.dataset.live);
  source.addEventListener("update", function (event) {
    const regions = JSON.parse(event.data);
    for (const id of Object.keys(regions)) {
      const element = document.getElementById(id);
      if (element && element.dataset.key !== regions[id].key) {
        element.outerHTML = regions[id].html;
      }
    }
    main.dataset.updates = String(Number(main.dataset.updates || 0) + 1);
  });
})();
