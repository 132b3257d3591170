// The function page's likely-path chart: instructions and llvm-mca's estimated cycles per commit, a pair of
// lines per toolchain (Chart.js). Data: <script id="cost-data"> (web/pages/function.py cost_columns), commits
// from the size chart's <script id="history-data">.
(function () {
  "use strict";
  var el = document.getElementById("cost-data");
  var hist = document.getElementById("history-data");
  var canvas = document.getElementById("cost-chart");
  if (!el || !hist || !canvas || typeof Chart === "undefined") return;
  var d = JSON.parse(el.textContent);
  var commits = JSON.parse(hist.textContent).commits;
  var palette = ["#1f5fbf", "#d1495b", "#2a9d8f", "#e9a100", "#7b2cbf", "#3d5a80", "#e76f51", "#588157",
                 "#b5838d", "#264653"];
  var datasets = [];
  d.lines.forEach(function (line, k) {
    var color = palette[k % palette.length];
    datasets.push({ label: line.label + " instructions", data: line.insns, yAxisID: "y", borderColor: color,
                    backgroundColor: color, spanGaps: true, tension: 0, borderWidth: 2 });
    datasets.push({ label: line.label + " est. cycles", data: line.cycles, yAxisID: "y1", borderColor: color,
                    backgroundColor: color, borderDash: [6, 4], spanGaps: true, tension: 0, borderWidth: 2 });
  });
  window.sizewatchCostChart = new Chart(canvas, {
    type: "line",
    data: { labels: commits.sha.map(function (s) { return s.slice(0, 12); }), datasets: datasets },
    options: {
      animation: false, responsive: true, maintainAspectRatio: false,
      interaction: { mode: "nearest", intersect: false, axis: "x" },
      scales: {
        y: { title: { display: true, text: "instructions" }, position: "left" },
        y1: { title: { display: true, text: "estimated cycles" }, position: "right", grid: { drawOnChartArea: false } }
      },
      onClick: function (evt, elements) {
        if (elements.length) window.location.href = "/commit/" + commits.sha[elements[0].index];
      }
    }
  });
})();
