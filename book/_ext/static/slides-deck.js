/* rbtutor: the start of a slide deck (book/_ext/slides.py writes the decks).
   Loaded first, as a classic script (decks are read from file:// too): it gives MathJax its
   options before MathJax loads, and starts reveal.js once the document is read. When MathJax
   has typeset the equations, reveal.js lays the slides out again and the root element says so
   (data-mathjax="typeset"), for the tests. */
window.MathJax = {
  tex: {inlineMath: [['\\(', '\\)']], displayMath: [['\\[', '\\]']]},
  startup: {
    pageReady() {
      return window.MathJax.startup.defaultPageReady().then(() => {
        document.documentElement.dataset.mathjax = 'typeset';
        if (window.Reveal && window.Reveal.isReady()) window.Reveal.layout();
      });
    }
  }
};

document.addEventListener('DOMContentLoaded', () => {
  window.Reveal.initialize({
    hash: true,
    width: 1280,
    height: 800,
    margin: 0.04,
    center: false,
    transition: 'none',
    slideNumber: 'c/t',
    keyboard: true
  });
});
