// Display equations wider than their column (a phone, a narrow window) are drawn smaller until
// they fit, but never below MIN_SCALE of their size, where digits such as 0.707107 stay readable:
// an equation still too wide at that size scrolls sideways in its own box (the class
// "qkv-math-scrolls"), and the page itself never does. MathJax 3 does not break a line by itself.
// The math was typeset when the site was built; this runs once the page's elements are there,
// again when its fonts arrive and whenever the window changes size. Each equation records the
// scale it is drawn at in data-fit-scale (the browser test reads it).
// Every formula is measured before any is resized: a size written between two measures would make
// the browser lay out the whole page again for the next one, once per formula on a long page.
(() => {
  const MIN_SCALE = 0.85;

  const fit = () => {
    const containers = [...document.querySelectorAll('mjx-container[display="true"]')];
    // 1) The sizes the stylesheet gives: its own, and that of the text around it, which text in
    //    the page's fonts inside the formula is drawn at.
    for (const container of containers) {
      container.style.fontSize = '';
      container.style.removeProperty('--qkv-text-size');
      container.classList.remove('qkv-math-scrolls');
      container.dataset.fitScale = '1';
    }
    // 2) Measure them all in one layout.
    const wide = [];
    for (const container of containers) {
      const math = container.querySelector('mjx-math');
      const box = container.clientWidth;
      const width = math ? math.getBoundingClientRect().width : 0;
      if (!box || width <= box) continue;
      const style = getComputedStyle(container);
      const wanted = (box - 2) / width;
      wide.push({
        container,
        wanted,
        scale: Math.max(MIN_SCALE, wanted),
        natural: parseFloat(style.fontSize),
        text: parseFloat(style.getPropertyValue('--qkv-text-size')),
      });
    }
    // 3) Then resize the ones too wide.
    for (const { container, wanted, scale, natural, text } of wide) {
      container.style.fontSize = `${(natural * scale).toFixed(2)}px`;
      if (text) container.style.setProperty('--qkv-text-size', `${(text * scale).toFixed(2)}px`);
      container.dataset.fitScale = scale.toFixed(3);
      if (wanted < MIN_SCALE) container.classList.add('qkv-math-scrolls');
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
