// The function page's chart: one line per toolchain of the function's size across commits (Chart.js,
// served by the app). Data: the page's <script id="history-data"> (web/charts.py history_columns).
(function () {
  "use strict";
  var el = document.getElementById("history-data");
  var canvas = document.getElementById("history-chart");
  if (!el || !canvas || typeof Chart === "undefined") return;
  var d = JSON.parse(el.textContent);
  var palette = ["#1f5fbf", "#d1495b", "#2a9d8f", "#e9a100", "#7b2cbf", "#3d5a80", "#e76f51", "#588157",
                 "#b5838d", "#264653"];
  var labels = d.commits.sha.map(function (s) { return s.slice(0, 12); });
  var datasets = d.lines.map(function (line, k) {
    var name = line.label;
    var color = palette[k % palette.length];
    var data = line.size.map(function (v, i) {
      if (line.state[i] === null) return null;                      // not built at this commit
      return v === null ? (line.state[i] === 5 ? null : 0) : v;      // no out-of-line copy: 0 bytes
    });
    return {
      label: name, data: data, borderColor: color, backgroundColor: color, borderWidth: 2, spanGaps: true,
      stepped: false, tension: 0,
      pointStyle: line.state.map(function (s) { return s === null ? "circle" : d.markers[s]; }),
      pointRadius: line.state.map(function (s) { return s === null ? 0 : (labels.length > 300 ? 2 : 4); }),
      pointHoverRadius: 6,
      pointBackgroundColor: line.state.map(function (s) { return s === 2 || s === 4 ? "#ffffff" : color; }),
      sizewatchLine: line
    };
  });
  var chart = new Chart(canvas, {
    type: "line",
    data: { labels: labels, datasets: datasets },
    options: {
      animation: false, responsive: true, maintainAspectRatio: false, normalized: true,
      interaction: { mode: "nearest", intersect: false, axis: "x" },
      scales: {
        x: { title: { display: true, text: "commit (oldest → newest)" }, ticks: { autoSkip: true, maxRotation: 60, font: { family: "monospace" } } },
        y: { title: { display: true, text: "bytes" }, beginAtZero: false }
      },
      plugins: {
        legend: { position: "top", labels: { usePointStyle: true } },
        tooltip: {
          callbacks: {
            title: function (items) {
              var i = items[0].dataIndex;
              return d.commits.sha[i].slice(0, 12) + "  " + d.commits.subject[i];
            },
            label: function (item) {
              var line = item.dataset.sizewatchLine, i = item.dataIndex, s = line.state[i];
              var text = d.states[s];
              if ((s === 1 || s === 2) && line.inlined[i]) text += " " + line.inlined[i] + "x";
              if (line.declared[i] && line.declared[i] !== "unknown") text = line.declared[i] + ": " + text;
              var size = line.size[i] === null ? "no out-of-line copy" : line.size[i] + " bytes";
              return item.dataset.label + ": " + size + " (" + text + ")";
            }
          }
        }
      },
      onClick: function (evt, elements) {
        if (elements.length) window.location.href = "/commit/" + d.commits.sha[elements[0].index];
      }
    }
  });
  window.sizewatchChart = chart;
})();
