// Math on the search page. The results are added after MathJax's first pass over the page, so the
// math in their titles and summaries (for example "Why divide by \(\sqrt{d_k}\)?") is typeset as they
// arrive. A summary is cut out of a page's text around the search term, and a cut through a formula
// leaves TeX that cannot be typeset: display math is left out of summaries, and so are code listings
// and printed outputs (a docstring's TeX is code there, never typeset), and an inline formula cut at
// either end of a summary is dropped.

const tidySummary = (text) => {
  const firstClose = text.indexOf("\\)");
  const firstOpen = text.indexOf("\\(");
  if (firstClose >= 0 && (firstOpen < 0 || firstClose < firstOpen)) text = "..." + text.slice(firstClose + 2);
  const lastOpen = text.lastIndexOf("\\(");
  if (lastOpen >= 0 && lastOpen > text.lastIndexOf("\\)")) text = text.slice(0, lastOpen) + "...";
  return text;
};

const leaveDisplayMathOutOfSummaries = () => {
  if (typeof Search === "undefined") return; // Sphinx's searchtools.js is not on this page
  const htmlToText = Search.htmlToText;
  Search.htmlToText = (htmlString, anchor) => {
    const page = new DOMParser().parseFromString(htmlString, "text/html");
    page.querySelectorAll("div.math, pre").forEach((block) => block.replaceWith(" … "));
    return htmlToText(page.documentElement.outerHTML, anchor);
  };
  const makeSearchSummary = Search.makeSearchSummary;
  Search.makeSearchSummary = (...args) => {
    const summary = makeSearchSummary(...args);
    if (summary) summary.textContent = tidySummary(summary.textContent);
    return summary;
  };
};

// Sphinx marks the search term in a summary with a <span class="highlighted">. Inside an inline
// formula (\(\mathrm{softmax}(QK^\top)\)) the mark would cut the formula's TeX in two pieces that
// cannot be typeset, so there the mark is taken out again.
const unmarkTermsInsideMath = (results) => {
  const count = (text, delimiter) => text.split(delimiter).length - 1;
  for (const summary of results.querySelectorAll("p.context")) {
    let open = 0;
    for (const node of [...summary.childNodes]) {
      if (node.nodeType === Node.TEXT_NODE) {
        open += count(node.nodeValue, "\\(") - count(node.nodeValue, "\\)");
      } else if (open > 0 && node.classList && node.classList.contains("highlighted")) {
        node.replaceWith(document.createTextNode(node.textContent));
      }
    }
    summary.normalize();
  }
};

const typesetResultsAsTheyArrive = (results) => {
  let running = false;
  let again = false;
  const typeset = () => {
    unmarkTermsInsideMath(results);
    if (!window.MathJax || !window.MathJax.startup) return;
    if (running) {
      again = true;
      return;
    }
    running = true;
    window.MathJax.startup.promise
      .then(() => window.MathJax.typesetPromise([results]))
      .catch((error) => console.error("MathJax could not typeset the search results:", error))
      .finally(() => {
        running = false;
        if (again) {
          again = false;
          typeset();
        }
      });
  };
  new MutationObserver(typeset).observe(results, { childList: true, subtree: true });
};

// Registered before searchtools.js registers its own start-up, so both patches are in place first.
document.addEventListener("DOMContentLoaded", () => {
  const results = document.getElementById("search-results");
  if (!results) return;
  leaveDisplayMathOutOfSummaries();
  typesetResultsAsTheyArrive(results);
});
