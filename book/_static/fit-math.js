// Display equations wider than their column (a phone, a narrow window) are drawn smaller until
// they fit, down to MIN_SCALE of their size: MathJax 3 does not break a line by itself. The math
// was typeset when the site was built; this runs once the page's elements are there, again when
// its fonts arrive and whenever the window changes size.
(() => {
  const MIN_SCALE = 0.6;

  const fit = () => {
    for (const container of document.querySelectorAll('mjx-container[display="true"]')) {
      // The sizes the stylesheet gives it, to measure again: its own, and that of the text around
      // it, which text in the page's fonts inside the formula is drawn at.
      container.style.fontSize = '';
      container.style.removeProperty('--qkv-text-size');
      const math = container.querySelector('mjx-math');
      const box = container.clientWidth;
      const width = math ? math.getBoundingClientRect().width : 0;
      if (!box || width <= box) continue;
      const scale = Math.max(MIN_SCALE, (box - 2) / width);
      const style = getComputedStyle(container);
      const natural = parseFloat(style.fontSize);
      const text = parseFloat(style.getPropertyValue('--qkv-text-size'));
      container.style.fontSize = `${(natural * scale).toFixed(2)}px`;
      if (text) container.style.setProperty('--qkv-text-size', `${(text * scale).toFixed(2)}px`);
    }
  };

  const start = () => {
    fit();
    document.fonts.ready.then(fit);
  };
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
  let pending = null;
  window.addEventListener('resize', () => {
    clearTimeout(pending);
    pending = setTimeout(fit, 100);
  });
})();
