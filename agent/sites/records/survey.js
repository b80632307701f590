// A survey strip over the whole page: not announced as a dialog, it swallows clicks until
// "Continue to site". Escape does nothing (the key press "succeeds" and the strip stays).
(function () {
  if (document.cookie.indexOf("survey=1") >= 0) return;
  var strip = document.createElement("div");
  strip.id = "survey-strip";
  strip.style.cssText = "position:fixed;inset:0;background:rgba(255,255,255,.6);z-index:1000;display:flex;align-items:flex-start;justify-content:center";
  strip.innerHTML = '<div style="background:#ffd;padding:12px;margin-top:8px;max-width:560px">' +
    '<p>Help us improve the records office: answer six questions about your visit.</p>' +
    '<button id="survey-take">Take the survey</button> <button id="survey-go">Continue to site</button></div>';
  document.body.appendChild(strip);
  document.getElementById("survey-go").addEventListener("click", function () {
    document.cookie = "survey=1; path=/";
    strip.remove();
  });
  document.getElementById("survey-take").addEventListener("click", function () {
    strip.querySelector("p").textContent = "The survey opens after your visit. Thank you!";
  });
})();
