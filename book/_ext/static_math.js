// Typesets TeX with MathJax 3 in node, for static_math.py: the site's math is finished when the
// site is built, and no page loads a typesetting script.
//
//     node static_math.js <MathJax's es5 folder> '<JSON of MathJax's "tex" options>'
//
// Reads one JSON request per line on stdin and answers each with one JSON line on stdout, in order:
//
//     {"tex": "QK^\\top", "display": false}  ->  {"html": "<mjx-container ...>", "errors": []}
//     {"stylesheet": true}                   ->  {"css": "mjx-container[jax=\"CHTML\"] ..."}
//
// The output is MathJax's CommonHTML (CHTML) with its assistive MathML: the formula as the reader
// sees it (aria-hidden), and a MathML copy for screen readers whose <semantics> keeps the TeX as an
// annotation (application/x-tex), which assistive technology does not read aloud. "errors" lists
// what MathJax could not typeset (an undefined control sequence, a missing brace); the formula is
// then drawn as MathJax draws an error. The stylesheet covers every character of MathJax's TeX
// fonts, so that one file serves every page, and math copied from one page to another (the search
// page's summaries) is drawn too. It loads the fonts from "fonts/" beside the stylesheet.
//
// It reads and writes nothing else, and never reaches the network: MathJax's components load from
// the es5 folder given.

const path = require('path');
const readline = require('readline');

const [mathjaxFolder, texOptions] = process.argv.slice(2);
const errors = [];

require(path.resolve(mathjaxFolder, 'node-main.js')).init({
  loader: {
    load: ['input/tex', 'output/chtml', 'a11y/assistive-mml'],
    versionWarnings: false,
  },
  tex: {
    ...JSON.parse(texOptions || '{}'),
    // Without "noundefined" an unknown macro is an error to report, not red text on the page.
    packages: {'[-]': ['noundefined']},
    formatError: (jax, error) => {
      errors.push(error.message);
      return jax.formatError(error);
    },
  },
  chtml: {
    fontURL: 'fonts',
    adaptiveCSS: false,
    // The browser's MathJax scales math to the x-height of the text around it; the stylesheet
    // does the same with the CSS ex unit (static_math.py), so the markup is drawn at scale 1.
    matchFontHeight: false,
  },
  // MathJax measures text that its fonts lack (Chinese) in the browser; node cannot, and guesses
  // each Chinese character's width. One character is one em of the text around, which is
  // 0.442 / 0.5625 = 0.786 em of the math for the theme's sans-serif text (its x-height is
  // 0.5625 em; see the stylesheet's matchFontHeight). It sets the least width MathJax gives an
  // array of such text (the tokens beside a matrix): a smaller guess than the truth never clips.
  liteAdaptor: {cjkCharWidth: 0.786},
  startup: {typeset: false},
}).then((MathJax) => {
  const adaptor = MathJax.startup.adaptor;

  // <math>children</math> -> <math><semantics><mrow>children</mrow><annotation>TeX</annotation></semantics></math>
  const annotate = (container, tex) => {
    const math = adaptor.tags(container, 'math')[0];
    if (!math) return;
    const mrow = adaptor.node('mrow', {}, adaptor.childNodes(math).slice());
    const annotation = adaptor.node('annotation', {encoding: 'application/x-tex'}, [adaptor.text(tex)]);
    adaptor.append(math, adaptor.node('semantics', {}, [mrow, annotation]));
  };

  // Text in a character that MathJax's fonts do not have (Chinese in \text{外送}) is drawn in the
  // page's fonts, at the size of the text around the formula times the size of the script it sits
  // in (a subscript's 70.7 %). That size of the surrounding text is the stylesheet's business
  // (static_math.py); the script's size is known here, and each such run of text gets it.
  const SIZES = {s: 0.707, ss: 0.5, Tn: 0.6, sm: 0.85, lg: 1.2, Lg: 1.44, LG: 1.73, hg: 2.07, HG: 2.49};
  const scaleOfUnknownText = (container) => {
    for (const text of adaptor.tags(container, 'mjx-utext')) {
      let scale = 1;
      for (let node = adaptor.parent(text); node && node !== container; node = adaptor.parent(node)) {
        const size = adaptor.getAttribute(node, 'size');
        const percent = /^([\d.]+)%$/.exec(adaptor.getStyle(node, 'font-size') || '');
        scale *= (SIZES[size] || 1) * (percent ? parseFloat(percent[1]) / 100 : 1);
      }
      if (Math.abs(scale - 1) > 0.001) adaptor.setStyle(text, '--qkv-text-scale', scale.toFixed(3));
    }
  };

  const typeset = async (request) => {
    if (request.stylesheet) {
      return {css: adaptor.textContent(MathJax.chtmlStylesheet())};
    }
    errors.length = 0;
    MathJax.texReset(); // labels and \tag numbers belong to one formula, never to the next one
    const container = await MathJax.tex2chtmlPromise(request.tex, {display: request.display});
    scaleOfUnknownText(container);
    annotate(container, request.tex);
    return {html: adaptor.outerHTML(container), errors: [...errors]};
  };

  // One request at a time, in the order they came: each answer is the next line.
  let queue = Promise.resolve();
  const lines = readline.createInterface({input: process.stdin, terminal: false});
  lines.on('line', (line) => {
    queue = queue
      .then(() => typeset(JSON.parse(line)))
      .catch((error) => ({html: '', errors: [String(error && error.message || error)]}))
      .then((answer) => process.stdout.write(JSON.stringify(answer) + '\n'));
  });
  // Exit once the last answer has left: process.exit() alone can cut a long write to a pipe.
  lines.on('close', () => queue.then(() => process.stdout.write('', () => process.exit(0))));
  process.stdout.write(JSON.stringify({ready: MathJax.version}) + '\n');
}).catch((error) => {
  process.stderr.write(`MathJax could not start: ${error && error.stack || error}\n`);
  process.exit(1);
});
