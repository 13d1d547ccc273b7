// llmload: name Locust's size column for what it holds, put the LLM charts under Locust's own, and say
// REHEARSAL beside the host (in the top bar and under the form's host field) when the host is the built-in target.
(function () {
  "use strict";
  const RENAMED = {"Average size (bytes)": "Mean output tokens", "Average Size (bytes)": "Mean output tokens"};
  const BADGE = "display:inline-block;margin-top:2px;padding:0 4px;border-radius:3px;background:#fff;color:#b00000;" +
    "font:700 11px/1.4 system-ui,sans-serif;max-width:44vw";  // wraps rather than push the header's counters away
  const NOTE = "margin:4px 0 0 14px;color:#b00000;font:700 12px/1.4 system-ui,sans-serif";
  let target = {host: "", rehearsal: ""}, asking = false, hostSeen = "";
  function rename(root) {
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const text = node.nodeValue.trim();
      if (RENAMED[text]) node.nodeValue = RENAMED[text];
    }
  }
  function chartsTabShown() {
    const tab = [...document.querySelectorAll('[role="tab"]')].find(t => t.textContent.trim() === "Charts");
    return tab && tab.getAttribute("aria-selected") === "true";
  }
  function placeCharts() {
    let frame = document.getElementById("llmload-charts");
    if (!chartsTabShown()) { if (frame) frame.remove(); return; }
    if (frame) return;
    const panel = document.querySelector(".echarts-for-react, [class*='chart']")?.closest("[role='tabpanel']")
      || document.querySelector("main") || document.body;
    frame = document.createElement("iframe");
    frame.id = "llmload-charts";
    frame.src = "/llmload/charts";
    frame.title = "LLM metrics over time (llmload)";
    frame.style.cssText = "width:100%;height:600px;border:0;margin-top:12px";
    panel.appendChild(frame);
  }
  // One element of ours right after `anchor`, holding `text`; none when there is no text (or no anchor).
  function place(anchor, id, text, style) {
    let note = document.getElementById(id);
    if (!anchor || !text) { if (note) note.remove(); return; }
    if (!note) {
      note = document.createElement("div");
      note.id = id;
      note.style.cssText = style;
    }
    if (note.textContent !== text) note.textContent = text;
    if (anchor.nextElementSibling !== note) anchor.after(note);
  }
  function navHost() {  // Locust's top bar: a "Host" caption over the host's address
    return [...document.querySelectorAll("p")].find(p => p.previousElementSibling?.textContent.trim() === "Host");
  }
  function showRehearsal() {
    const shown = navHost();
    if (shown && shown.textContent.trim() !== hostSeen) {  // a test started against another host
      hostSeen = shown.textContent.trim();
      askTarget();
    }
    place(shown, "llmload-rehearsal", target.rehearsal, BADGE);
    const field = document.querySelector('input[name="host"]')?.closest(".MuiFormControl-root, .MuiTextField-root");
    place(field, "llmload-rehearsal-form", target.rehearsal && `${target.host}: ${target.rehearsal}`, NOTE);
  }
  async function askTarget() {
    if (asking) return;
    asking = true;
    try {
      target = await (await fetch("/llmload/target", {cache: "no-store"})).json();
    } catch (e) { /* the UI may be stopping; the next tick asks again */ }
    asking = false;
    showRehearsal();
  }
  new MutationObserver(() => { rename(document.body); placeCharts(); showRehearsal(); }).observe(document.body, {childList: true, subtree: true, attributes: true, attributeFilter: ["aria-selected"]});
  askTarget();
  setInterval(askTarget, 5000);
})();
