// Display equations wider than their column (a phone, a narrow window) are drawn smaller until
// they fit, but never below MIN_SCALE of their size, where digits such as 0.707107 stay readable:
// an equation still too wide at that size scrolls sideways in its own box (the class
// "qkv-math-scrolls"), and the page itself never does. MathJax 3 does not break a line by itself.
// Runs once MathJax has typeset the page, again when its fonts arrive and when the window changes
// size. Each equation records the scale it is drawn at in data-fit-scale (the browser test reads it).
(() => {
  const MIN_SCALE = 0.85;

  const fit = () => {
    for (const container of document.querySelectorAll('mjx-container[display="true"]')) {
      if (container.dataset.fitFontSize === undefined) {
        container.dataset.fitFontSize = container.style.fontSize || '';
      }
      container.style.fontSize = container.dataset.fitFontSize;
      container.classList.remove('qkv-math-scrolls');
      container.dataset.fitScale = '1';
      const math = container.querySelector('mjx-math');
      const box = container.clientWidth;
      const width = math ? math.getBoundingClientRect().width : 0;
      if (!box || width <= box) continue;
      const wanted = (box - 2) / width;
      const scale = Math.max(MIN_SCALE, wanted);
      const base = parseFloat(container.dataset.fitFontSize) || 100;
      container.style.fontSize = `${(base * scale).toFixed(1)}%`;
      container.dataset.fitScale = scale.toFixed(3);
      if (wanted < MIN_SCALE) container.classList.add('qkv-math-scrolls');
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
