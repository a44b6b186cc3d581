// The dashboard's one script: live updates. A page that has live regions names its event
// stream in `data-live`; each update carries regions by element id, with a key, and a
// region is replaced only when its key differs from the one on the page (a question's
// form keeps what was typed while the same questions stay open).
//
// A replaced region keeps what the person holds in it: the focused control (a keyboard
// user on a node of the DAG stays there while the timeline moves) and the `<details>`
// they opened. Both are found again in the new region by their path of child positions,
// when the element there is of the same kind and, for a link, goes to the same place.
"use strict";
(function () {
  const main = document.querySelector("main[data-live]");
  if (!main || !window.EventSource) return;

  /** The child positions from `root` down to `element`. */
  function pathOf(root, element) {
    const path = [];
    for (let at = element; at && at !== root; at = at.parentElement) {
      path.unshift(Array.prototype.indexOf.call(at.parentElement.children, at));
    }
    return path;
  }

  /** The element at `path` under `root`, if it is `like`'s kind (and link target). */
  function sameAt(root, path, like) {
    let at = root;
    for (const index of path) {
      at = at && at.children[index];
    }
    if (!at || at.tagName !== like.tagName) return null;
    if (like.getAttribute("href") !== at.getAttribute("href")) return null;
    return at;
  }

  function replace(element, html) {
    const focused = element.contains(document.activeElement) ? document.activeElement : null;
    const focusPath = focused && pathOf(element, focused);
    const opened = Array.from(element.querySelectorAll("details[open]"), (d) => [pathOf(element, d), d]);
    const holder = document.createElement("div");
    holder.innerHTML = html;
    const fresh = holder.firstElementChild;
    if (!fresh) return;
    for (const [path, like] of opened) {
      const again = sameAt(fresh, path, like);
      if (again) again.open = true;
    }
    element.replaceWith(fresh);
    if (focused) {
      const again = sameAt(fresh, focusPath, focused);
      if (again) again.focus({ preventScroll: true });
    }
  }

  const source = new EventSource(main.dataset.live);
  source.addEventListener("update", function (event) {
    const regions = JSON.parse(event.data);
    for (const id of Object.keys(regions)) {
      const element = document.getElementById(id);
      if (element && element.dataset.key !== regions[id].key) {
        replace(element, regions[id].html);
      }
    }
    main.dataset.updates = String(Number(main.dataset.updates || 0) + 1);
  });
})();
