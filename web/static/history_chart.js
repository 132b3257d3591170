// The function page's chart: one line per toolchain of the function's size across commits (Chart.js,
// served by the app). Data: the page's <script id="history-data"> (web/charts.py history_columns),
// compact columns aligned with the commits. The x axis is the commit's index on a linear scale, and
// points are passed pre-parsed ({x, y}, parsing: false), which is what lets Chart.js's decimation
// plugin thin a long history (1,000 commits x 8 toolchains) to what the canvas can show (LTTB keeps
// the shape, steps included); tooltips and clicks read the original point (x is its commit's index).
(function () {
  "use strict";
  var el = document.getElementById("history-data");
  var canvas = document.getElementById("history-chart");
  if (!el || !canvas || typeof Chart === "undefined") return;
  var d = JSON.parse(el.textContent);
  var palette = ["#1f5fbf", "#d1495b", "#2a9d8f", "#e9a100", "#7b2cbf", "#3d5a80", "#e76f51", "#588157",
                 "#b5838d", "#264653"];
  var n = d.commits.sha.length;
  var many = n > 300;
  function shortSha(i) { return d.commits.sha[i].slice(0, 12); }
  var datasets = d.lines.map(function (line, k) {
    var color = palette[k % palette.length];
    var data = [];
    for (var i = 0; i < n; i++) {
      var s = line.state[i], v = line.size[i];
      if (s === null || (v === null && s === 5)) continue;        // not built here, or the build failed
      data.push({ x: i, y: v === null ? 0 : v });                 // no out-of-line copy: 0 bytes
    }
    function state(ctx) { return ctx.raw ? line.state[ctx.raw.x] : 0; }
    return {
      label: line.label, data: data, borderColor: color, backgroundColor: color, borderWidth: 2, spanGaps: true,
      stepped: false, tension: 0,
      pointStyle: function (ctx) { return d.markers[state(ctx)]; },
      pointRadius: many ? 2 : 4,
      pointHoverRadius: 6,
      pointBackgroundColor: function (ctx) { var s = state(ctx); return s === 2 || s === 4 ? "#ffffff" : color; },
      sizewatchLine: line
    };
  });
  var chart = new Chart(canvas, {
    type: "line",
    data: { datasets: datasets },
    options: {
      animation: false, responsive: true, maintainAspectRatio: false, normalized: true, parsing: false,
      interaction: { mode: "nearest", intersect: false, axis: "x" },
      scales: {
        x: { type: "linear", min: 0, max: Math.max(n - 1, 1), title: { display: true, text: "commit (oldest → newest)" },
             ticks: { autoSkip: true, maxRotation: 60, font: { family: "monospace" }, precision: 0,
                      callback: function (v) { return Number.isInteger(v) && v >= 0 && v < n ? shortSha(v) : ""; } } },
        y: { title: { display: true, text: "bytes" }, beginAtZero: false }
      },
      plugins: {
        decimation: { enabled: true, algorithm: "lttb", samples: 500, threshold: 600 },
        legend: { position: "top", labels: { usePointStyle: true } },
        tooltip: {
          callbacks: {
            title: function (items) {
              var i = items[0].raw.x;
              return shortSha(i) + "  " + d.commits.subject[i];
            },
            label: function (item) {
              var line = item.dataset.sizewatchLine, i = item.raw.x, s = line.state[i];
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
        if (!elements.length) return;
        var point = chart.data.datasets[elements[0].datasetIndex].data[elements[0].index];
        if (point) window.location.href = "/commit/" + d.commits.sha[point.x];
      }
    }
  });
  window.sizewatchChart = chart;
})();
