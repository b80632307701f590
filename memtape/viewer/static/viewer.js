// memtape viewer: keyboard navigation only. Every page reads without this file (the CSP allows no
// inline script, so this is the only script there is).
// j / k: next / previous row; Enter: open it; n / p: next / previous page or step; u: up; /: search.
(function () {
  "use strict";
  var current = -1;
  function rows() { return Array.prototype.slice.call(document.querySelectorAll("[data-row]")); }
  function select(delta) {
    var all = rows();
    if (!all.length) { return; }
    if (current >= 0 && current < all.length) { all[current].classList.remove("selected"); }
    current = Math.max(0, Math.min(all.length - 1, current + delta));
    var row = all[current];
    row.classList.add("selected");
    var link = row.querySelector("a");
    if (link) { link.focus(); } else { row.scrollIntoView({ block: "nearest" }); }
  }
  function follow(rel) {
    var link = document.querySelector("a[rel~='" + rel + "']");
    if (link) { window.location.href = link.href; }
  }
  document.addEventListener("keydown", function (event) {
    var target = event.target;
    if (event.altKey || event.ctrlKey || event.metaKey) { return; }
    if (target && (target.tagName === "INPUT" || target.tagName === "SELECT" || target.tagName === "TEXTAREA")) {
      if (event.key === "Escape") { target.blur(); }
      return;
    }
    var actions = {
      "j": function () { select(1); },
      "k": function () { select(-1); },
      "n": function () { follow("next"); },
      "p": function () { follow("prev"); },
      "u": function () { follow("up"); },
      "/": function () { var box = document.querySelector("input[name='q']"); if (box) { box.focus(); box.select(); } }
    };
    if (Object.prototype.hasOwnProperty.call(actions, event.key)) {
      event.preventDefault();
      actions[event.key]();
    }
  });
}());
