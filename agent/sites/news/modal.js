// Newsletter modal rendered inside an open shadow root; its backdrop covers the page
// and swallows clicks until "Close" (inside the shadow DOM) is pressed. Escape is ignored.
customElements.define("newsletter-modal", class extends HTMLElement {
  connectedCallback() {
    var root = this.attachShadow({mode: "open"});
    root.innerHTML = '<style>.backdrop{position:fixed;inset:0;background:rgba(0,0,0,.4);z-index:900;display:flex;align-items:center;justify-content:center}' +
      '.box{background:#fff;padding:20px;width:360px}</style>' +
      '<div class="backdrop"><div class="box" role="dialog" aria-label="Newsletter">' +
      '<h2>Subscribe to the Daily Bulletin</h2><p>Get the news in your inbox every morning.</p>' +
      '<button id="subscribe">Subscribe</button> <button id="close">Close</button></div></div>';
    var self = this;
    root.getElementById("close").addEventListener("click", function () { sessionStorage.setItem("nl", "closed"); self.remove(); });
    root.getElementById("subscribe").addEventListener("click", function () { root.querySelector("p").textContent = "Please enter your e-mail on the subscription page."; });
  }
});
if (sessionStorage.getItem("nl") !== "closed") document.body.appendChild(document.createElement("newsletter-modal"));
