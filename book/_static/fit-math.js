// Display equations wider than their column (a phone, a narrow window) are drawn smaller until
// they fit, down to MIN_SCALE of their size: MathJax 3 does not break a line by itself. Runs once
// MathJax has typeset the page, again when its fonts arrive and when the window changes size.
(() => {
  const MIN_SCALE = 0.6;

  const fit = () => {
    for (const container of document.querySelectorAll('mjx-container[display="true"]')) {
      if (container.dataset.fitFontSize === undefined) {
        container.dataset.fitFontSize = container.style.fontSize || '';
      }
      container.style.fontSize = container.dataset.fitFontSize;
      const math = container.querySelector('mjx-math');
      const box = container.clientWidth;
      const width = math ? math.getBoundingClientRect().width : 0;
      if (!box || width <= box) continue;
      const scale = Math.max(MIN_SCALE, (box - 2) / width);
      const base = parseFloat(container.dataset.fitFontSize) || 100;
      container.style.fontSize = `${(base * scale).toFixed(1)}%`;
    }
  };

  const typeset = () => (window.MathJax && window.MathJax.startup && window.MathJax.startup.promise) ||
    Promise.resolve();

  window.addEventListener('load', () => {
    typeset().then(fit).then(() => document.fonts.ready).then(fit);
  });
  let pending = null;
  window.addEventListener('resize', () => {
    clearTimeout(pending);
    pending = setTimeout(fit, 100);
  });
})();
