// Math in the search results, typeset by nobody: every page carries its math typeset when the site
// was built, and the search page has the stylesheet of that math, so a summary shows a page's
// formulas as the page does. Sphinx cuts a summary out of the text of the result's page, around the
// search term; here each inline formula of that page stands in the text as a placeholder (two
// private-use characters around its number), and the summary gets the formulas back, moved from
// the fetched page. A formula cut at either end of a summary is dropped; display math is left out of
// summaries (" … "), and so are code listings and printed outputs (a docstring's TeX is code there,
// never typeset); and the search term is not marked inside a formula.

const OPEN = "\uE000";
const CLOSE = "\uE001";
const PLACEHOLDER = /\uE000(\d+)\uE001/;

// The inline formulas of the page whose summary is being made (htmlToText runs inside
// makeSearchSummary, for one page at a time).
let pageFormulas = [];

const tidySummary = (text) => {
  const firstClose = text.indexOf(CLOSE);
  const firstOpen = text.indexOf(OPEN);
  if (firstClose >= 0 && (firstOpen < 0 || firstClose < firstOpen)) text = "..." + text.slice(firstClose + 1);
  const lastOpen = text.lastIndexOf(OPEN);
  if (lastOpen >= 0 && lastOpen > text.lastIndexOf(CLOSE)) text = text.slice(0, lastOpen) + "...";
  return text;
};

// "a \uE0003\uE001 b" -> [text "a ", the page's formula 3, text " b"]
const withFormulas = (text, formulas) =>
  text.split(new RegExp(PLACEHOLDER, "g")).map((piece, index) => {
    if (index % 2 === 0) return document.createTextNode(piece);
    return document.adoptNode(formulas[Number(piece)]);
  });

const showFormulasInSummaries = () => {
  if (typeof Search === "undefined") return; // Sphinx's searchtools.js is not on this page
  const htmlToText = Search.htmlToText;
  Search.htmlToText = (htmlString, anchor) => {
    const page = new DOMParser().parseFromString(htmlString, "text/html");
    page.querySelectorAll("div.math, pre").forEach((block) => block.replaceWith(" … "));
    pageFormulas = [];
    page.querySelectorAll("span.math").forEach((formula) => {
      formula.replaceWith(OPEN + pageFormulas.length + CLOSE);
      pageFormulas.push(formula);
    });
    return htmlToText(page.documentElement.outerHTML, anchor);
  };
  const makeSearchSummary = Search.makeSearchSummary;
  Search.makeSearchSummary = (...args) => {
    const summary = makeSearchSummary(...args);
    if (summary) summary.replaceChildren(...withFormulas(tidySummary(summary.textContent), pageFormulas));
    pageFormulas = [];
    return summary;
  };
};

// Sphinx marks the search term in a result with a <span class="highlighted"> wherever the term is
// in the text, the MathML of a formula included (<mi>softmax</mi>); there the mark is taken out.
const unmarkTermsInsideMath = (results) => {
  for (const mark of results.querySelectorAll("mjx-container .highlighted")) {
    const parent = mark.parentNode;
    mark.replaceWith(...mark.childNodes);
    parent.normalize();
  }
};

// Registered before searchtools.js registers its own start-up, so the patches are in place first.
document.addEventListener("DOMContentLoaded", () => {
  const results = document.getElementById("search-results");
  if (!results) return;
  showFormulasInSummaries();
  new MutationObserver(() => unmarkTermsInsideMath(results)).observe(results, { childList: true, subtree: true });
});
