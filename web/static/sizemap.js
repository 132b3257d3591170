// The treemap of /map/...: the page's own JSON (the same as its /api/ twin) drawn with ECharts.
// Build maps colour by top-level directory; change maps colour each rectangle by the sign of its delta.
(function () {
  "use strict";
  var el = document.getElementById("sizemap");
  if (!el) return;
  var d = JSON.parse(document.getElementById("sizemap-data").textContent);
  var diff = d.mode === "diff";
  var GROW = "#c0392b", SHRINK = "#27ae60", ZERO = "#95a5a6";

  function node(n) {
    var out = {name: n.name, value: n.value, kind: n.kind, size: n.size, delta: n.delta, old: n.old, path: n.path};
    if (diff) out.itemStyle = {color: n.delta > 0 ? GROW : n.delta < 0 ? SHRINK : ZERO};
    if (n.children) out.children = n.children.map(node);
    return out;
  }
  function fmt(v) { return String(v).replace(/\B(?=(\d{3})+(?!\d))/g, ","); }
  var chart = echarts.init(el, null, {renderer: "canvas"});
  chart.setOption({
    animation: false,
    tooltip: {
      formatter: function (info) {
        var v = info.data, where = v.kind === "function" ? "<br>" + echarts.format.encodeHTML(v.path || "") : "";
        var what = diff ? (v.old == null && v.kind === "function" ? "new, " + fmt(v.size) + " bytes"
                                                                   : (v.delta > 0 ? "+" : "") + fmt(v.delta) + " bytes")
                        : fmt(v.value) + " bytes";
        return "<b>" + echarts.format.encodeHTML(v.name) + "</b> (" + v.kind + ")" + where + "<br>" + what;
      }
    },
    series: [{
      type: "treemap", name: d.tree.name, data: d.tree.children.map(node),
      // two levels at a time; a click on a rectangle drills into it, the breadcrumb climbs back
      nodeClick: "zoomToNode", roam: false, leafDepth: 2, drillDownIcon: "▶ ", squareRatio: 1.2,
      left: 0, right: 0, top: 0, bottom: 40,
      breadcrumb: {show: true, bottom: 4},
      label: {show: true, formatter: "{b}"},
      upperLabel: {show: true, height: 22, color: "#fff"},
      levels: [
        {itemStyle: {borderColor: "#555", borderWidth: 2, gapWidth: 2}, upperLabel: {show: false}},
        {itemStyle: {borderColor: "#888", borderWidth: 4, gapWidth: 1}},
        {itemStyle: {borderColor: "#bbb", borderWidth: 3, gapWidth: 1}},
        {itemStyle: {borderColor: "#ddd", borderWidth: 2, gapWidth: 1}}
      ]
    }]
  });
  window.sizemapChart = chart;
  window.addEventListener("resize", function () { chart.resize(); });
})();
