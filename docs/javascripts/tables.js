// Long tables (the families report's): a click on a header sorts the rows by that column (a second
// click reverses), and a box above the table keeps the rows holding every word typed in it.
// Shorter tables are left as they are. No library: the site fetches nothing from outside itself.
(function () {
  "use strict";

  // a table with at least this many rows gets the filter box; every table of a page with one is sortable
  var LONG = 15;

  function cellText(row, column) {
    var cell = row.cells[column];
    return cell ? cell.textContent.trim() : "";
  }

  // "28/28 (skipped: ...)" sorts by 28/28 as numbers, a name by its letters with its digits as numbers
  var collator = new Intl.Collator(undefined, { numeric: true, sensitivity: "base" });

  function compare(a, b) {
    var x = parseFloat(a), y = parseFloat(b);
    if (!isNaN(x) && !isNaN(y) && x !== y) return x - y;
    return collator.compare(a, b);
  }

  function sortable(table) {
    var head = table.tHead;
    if (!head || !table.tBodies.length || head.dataset.sortable) return;
    head.dataset.sortable = "yes";
    var headers = head.rows[0].cells;
    Array.prototype.forEach.call(headers, function (header, column) {
      header.classList.add("nnterp-sortable");
      header.setAttribute("role", "button");
      header.setAttribute("tabindex", "0");
      header.setAttribute("aria-sort", "none");
      header.title = "Sort by this column";
      function sort() {
        var ascending = header.getAttribute("aria-sort") !== "ascending";
        Array.prototype.forEach.call(headers, function (other) {
          other.setAttribute("aria-sort", "none");
        });
        header.setAttribute("aria-sort", ascending ? "ascending" : "descending");
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var order = compare(cellText(a, column), cellText(b, column));
          return ascending ? order : -order;
        });
        rows.forEach(function (row) {
          body.appendChild(row);
        });
      }
      header.addEventListener("click", sort);
      header.addEventListener("keydown", function (event) {
        if (event.key === "Enter" || event.key === " ") {
          event.preventDefault();
          sort();
        }
      });
    });
  }

  function filterable(table) {
    if (table.dataset.filterable) return;
    table.dataset.filterable = "yes";
    var rows = Array.prototype.slice.call(table.tBodies[0].rows);
    var box = document.createElement("div");
    box.className = "nnterp-filter";
    var input = document.createElement("input");
    input.type = "search";
    input.placeholder = "Filter rows: words that every row shown must hold";
    input.setAttribute("aria-label", "Filter the table's rows");
    var count = document.createElement("span");
    count.className = "nnterp-filter-count";
    function update() {
      var words = input.value.toLowerCase().split(/\s+/).filter(Boolean);
      var shown = 0;
      rows.forEach(function (row) {
        var text = row.textContent.toLowerCase();
        var keep = words.every(function (word) {
          return text.indexOf(word) !== -1;
        });
        row.hidden = !keep;
        if (keep) shown += 1;
      });
      count.textContent = shown + " of " + rows.length + " rows";
    }
    input.addEventListener("input", update);
    box.appendChild(input);
    box.appendChild(count);
    // Material wraps a table in scrolling divs: the box goes above the outermost
    var anchor = table.closest(".md-typeset__scrollwrap") || table;
    anchor.parentNode.insertBefore(box, anchor);
    update();
  }

  function enhance() {
    var tables = document.querySelectorAll("article table");
    var long = Array.prototype.filter.call(tables, function (table) {
      return table.tBodies.length && table.tBodies[0].rows.length >= LONG;
    });
    if (!long.length) return;
    Array.prototype.forEach.call(tables, sortable);
    long.forEach(filterable);
  }

  // Material re-renders the page body on instant navigation and announces it on document$
  if (typeof window.document$ !== "undefined" && window.document$.subscribe) {
    window.document$.subscribe(enhance);
  } else if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", enhance);
  } else {
    enhance();
  }
})();
