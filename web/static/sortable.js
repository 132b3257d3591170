// Click a <th data-sort="num|text"> of a table.sortable to sort its tbody by that column (again: reverse).
// Numbers sort by the cell's data-value (empty = no value, always last); text by the cell's text.
(function () {
  "use strict";
  function key(cell, kind) {
    if (kind === "num") {
      var raw = cell.hasAttribute("data-value") ? cell.getAttribute("data-value") : cell.textContent.replace(/[^0-9.+-]/g, "");
      return raw === "" ? null : Number(raw);
    }
    return cell.textContent.trim().toLowerCase();
  }
  function sortBy(table, th) {
    var index = Array.prototype.indexOf.call(th.parentNode.children, th);
    var kind = th.getAttribute("data-sort");
    var dir = th.getAttribute("aria-sort") === "descending" ? "ascending" : "descending";
    if (!th.hasAttribute("aria-sort") && kind === "text") dir = "ascending";
    table.querySelectorAll("th[aria-sort]").forEach(function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", dir);
    var sign = dir === "ascending" ? 1 : -1;
    Array.prototype.forEach.call(table.tBodies, function (body) {
      var rows = Array.prototype.slice.call(body.rows);
      rows.forEach(function (r, i) { r._order = i; });
      rows.sort(function (a, b) {
        var x = key(a.cells[index], kind), y = key(b.cells[index], kind);
        if (x === null && y === null) return a._order - b._order;
        if (x === null) return 1;
        if (y === null) return -1;
        if (x < y) return -sign;
        if (x > y) return sign;
        return a._order - b._order;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  }
  document.querySelectorAll("table.sortable th[data-sort]").forEach(function (th) {
    th.tabIndex = 0;
    th.title = th.title || "sort by this column";
    var table = th.closest("table");
    th.addEventListener("click", function () { sortBy(table, th); });
    th.addEventListener("keydown", function (e) { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); sortBy(table, th); } });
  });
})();
