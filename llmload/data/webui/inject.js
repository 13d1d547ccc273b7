// llmload: name Locust's size column for what it holds, and put the LLM charts under Locust's own.
(function () {
  "use strict";
  const RENAMED = {"Average size (bytes)": "Mean output tokens", "Average Size (bytes)": "Mean output tokens"};
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
  new MutationObserver(() => { rename(document.body); placeCharts(); }).observe(document.body, {childList: true, subtree: true, attributes: true, attributeFilter: ["aria-selected"]});
})();
