// The Exercises page's install command names the course package's wheel relative to the page
// (book/_ext/problem_sets.py); pip needs its full address, which only the reader's browser knows.
document.addEventListener("DOMContentLoaded", () => {
  for (const block of document.querySelectorAll(".student-install[data-wheel]")) {
    const pre = block.querySelector("pre");
    if (pre) {
      pre.textContent = `pip install ${new URL(block.dataset.wheel, document.baseURI).href}`;
    }
  }
});
