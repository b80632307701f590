// Cookie banner: a full-page overlay that swallows clicks until "Accept all cookies".
// Escape does NOT dismiss it (many real banners ignore the keyboard).
(function () {
  if (document.cookie.indexOf("consent=1") >= 0) return;
  var overlay = document.createElement("div");
  overlay.id = "cookie-overlay";
  overlay.className = "cookie-overlay";
  overlay.style.cssText = "position:fixed;inset:0;background:rgba(0,0,0,.35);z-index:1000;display:flex;align-items:flex-end;justify-content:center";
  overlay.innerHTML = '<div role="dialog" aria-label="Cookie consent" style="background:#fff;padding:16px;margin:0 0 24px;max-width:520px">' +
    '<p>We use cookies to improve your shopping experience.</p>' +
    '<button id="cookie-accept">Accept all cookies</button> <button id="cookie-manage">Manage preferences</button></div>';
  document.body.appendChild(overlay);
  document.getElementById("cookie-accept").addEventListener("click", function () {
    document.cookie = "consent=1; path=/";
    overlay.remove();
  });
  document.getElementById("cookie-manage").addEventListener("click", function () {
    overlay.querySelector("p").textContent = "Only essential cookies can be managed here. Please accept to continue.";
  });
})();
