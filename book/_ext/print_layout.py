"""The page scripts that turn the single-page HTML book into a course text before `make pdf` prints it.

Used by book/_ext/print_pdf.py, after MathJax has typeset the page and with the
print media and the printable width emulated. :data:`PREPARE_JS` changes the page
in place and reports what it did:

* folded content (myst-nb's hidden cells, sphinx-design dropdowns) is unfolded. A
  generic myst-nb label ("Show code cell source") is dropped; a label the author
  wrote ("Hints for Problem 1") stays as a caption above the content;
* answers are printed only in the instructor edition. An answer is a folded block
  whose label names an answer or a worked solution, or speaks of the reference ship
  or module (the numbers of the answer key), or any element with the class
  ``rbtutor-answer``. The student and prose editions print a one-line note in its place;
* the prose edition, for reading on paper, leaves out the code of the notebook cells
  (and so the captions and cells left with nothing to show) and keeps their results:
  printed values, tables and figures. Code blocks of the text itself (commands of the
  manual) stay;
* a matplotlib JavaScript animation becomes one still frame with a caption;
* display formulas, tables and outputs wider than the page are scaled down to fit;
* a title page and a contents list (parts, chapters, sections and subsections, each
  a link to its heading, page numbers filled in later by :data:`FILL_PAGES_JS`) come first,
  and each chapter starts on a new page.

The report lists the contents entries in order (``id``, ``level``, ``tex`` parts)
for the page numbers and the PDF outline.
"""

from __future__ import annotations

import json

# Labels myst-nb gives a folded cell when the author gave none: web-only, never printed.
GENERIC_LABEL = r"^(Show|Hide) code cell (source|content|outputs?)$"
# A folded block whose label matches this holds answers of the graded problems.
ANSWER_LABEL = r"\banswers?\b|worked solution|reference (ship|module)"

PREPARE_JS = r"""
((edition, genericLabel, answerLabel) => {
  const generic = new RegExp(genericLabel, 'i');
  const answer = new RegExp(answerLabel, 'i');
  const report = {unfolded: 0, answersRemoved: 0, answersKept: 0, codeRemoved: 0, stills: 0, scaled: 0,
                  entries: []};
  const article = document.querySelector('article.bd-article') || document.querySelector('main') || document.body;

  const labelOf = (details) => {
    const summary = details.querySelector(':scope > summary');
    if (!summary) return '';
    const collapsed = summary.querySelector('.collapsed');
    return ((collapsed || summary).textContent || '').replace(/\s+/g, ' ').trim();
  };
  const note = (text) => {
    const p = document.createElement('p');
    p.className = 'rbtutor-print-note';
    p.textContent = text;
    return p;
  };

  // 1. Answers and folded content.
  const folded = [...document.querySelectorAll('details')];
  for (const details of folded) {
    if (!details.isConnected) continue;
    const label = labelOf(details);
    const isAnswer = answer.test(label) || details.matches('.rbtutor-answer') ||
                     details.querySelector('.rbtutor-answer') !== null;
    const cell = details.closest('div.cell');
    if (isAnswer && edition !== 'instructor') {
      // A myst-nb cell whose answer part is folded: the whole cell goes (its input
      // computes the answers), an sphinx-design dropdown goes by itself.
      const gone = details.classList.contains('sd-dropdown') || !cell ? details : cell;
      gone.replaceWith(note('The answers are printed in the instructor edition.'));
      report.answersRemoved += 1;
      continue;
    }
    if (isAnswer) report.answersKept += 1;
    details.open = true;
    const summary = details.querySelector(':scope > summary');
    if (summary) {
      const caption = document.createElement('p');
      caption.className = 'rbtutor-print-caption';
      if (details.classList.contains('sd-dropdown')) {
        summary.querySelectorAll('.sd-summary-state-marker, .sd-summary-icon, svg').forEach(n => n.remove());
        caption.append(...summary.childNodes);
      } else if (!generic.test(label)) {
        caption.textContent = label.replace(/^Show (the )?/i, (m, the) => the ? 'The ' : '');
      }
      if (caption.textContent.trim()) summary.replaceWith(caption); else summary.remove();
    }
    // A <details> that is open but has no summary would get the browser's "Details" label.
    const block = document.createElement('div');
    block.className = details.className + ' rbtutor-print-unfolded';
    block.append(...details.childNodes);
    details.replaceWith(block);
    report.unfolded += 1;
  }

  // 1b. The prose edition: the code of the cells goes, their results stay.
  const showsSomething = (element) => {
    const copy = element.cloneNode(true);
    copy.querySelectorAll('.rbtutor-print-caption').forEach(n => n.remove());
    return copy.textContent.trim() !== '' ||
      copy.querySelector('img, svg, table, canvas, video, iframe, mjx-container') !== null;
  };
  if (edition === 'prose') {
    for (const input of [...document.querySelectorAll('div.cell_input')]) {
      input.remove();
      report.codeRemoved += 1;
    }
    for (const block of [...document.querySelectorAll('.rbtutor-print-unfolded, div.cell')]) {
      if (block.isConnected && !showsSomething(block)) block.remove();
    }
  }

  // 2. Animations: one still frame, the middle one, with a caption.
  for (const box of [...document.querySelectorAll('div.animation')]) {
    const img = box.querySelector('img[id^="_anim_img"]');
    const slider = box.querySelector('input[id^="_anim_slider"]');
    if (!img) continue;
    const anim = window['anim' + img.id.slice('_anim_img'.length)];
    const frames = slider ? parseInt(slider.max, 10) + 1 : 1;
    const middle = Math.floor(frames / 2);
    if (anim && anim.set_frame) anim.set_frame(middle);
    const figure = document.createElement('figure');
    figure.className = 'rbtutor-print-still';
    const still = document.createElement('img');
    still.src = img.src;
    still.alt = img.alt || 'A frame of the animation';
    const caption = document.createElement('figcaption');
    caption.textContent = `A still of the animation: frame ${middle + 1} of ${frames}. ` +
      'The online book plays the whole motion.';
    figure.append(still, caption);
    box.replaceWith(figure);
    report.stills += 1;
  }

  // 3. The contents list: parts, chapters and their sections, from the theme's print toc.
  const toc = document.querySelector('#jb-print-toc nav');
  const headingOf = (section) => section &&
    section.querySelector([1, 2, 3, 4, 5, 6].map(n => `:scope > h${n}`).join(', '));
  const texOf = (heading) => {
    // The heading's text with each formula as its TeX source, in order.
    // (each formula carries its TeX in data-tex: MARK_AND_KEEP_JS, run before the first edition)
    const parts = [];
    const walk = (node) => {
      for (const child of node.childNodes) {
        if (child.nodeType === Node.TEXT_NODE) parts.push({text: child.textContent});
        else if (child.nodeName === 'MJX-CONTAINER') parts.push({tex: child.dataset.tex || ''});
        else if (child.classList && child.classList.contains('headerlink')) continue;
        else walk(child);
      }
    };
    walk(heading);
    return parts;
  };
  const entries = [];
  let made = 0;  // ids this script gives, numbered in order
  const addEntry = (kind, level, heading, fallback) => {
    // The link target: the heading's section when its id is unique in the book (the pages of
    // the single-page build can repeat an id, e.g. "learning-objectives"), else the heading
    // itself under an id of its own.
    let target = null;
    if (heading && /^rbtutor-(chapter|heading)-/.test(heading.id)) {
      target = heading.id;  // a heading met before keeps the id it was given
    } else if (heading && kind === 'chapter' && !heading.id && heading.getClientRects().length) {
      // Every chapter whose heading is printed gets an id of its own, so that the PDF names
      // where each chapter starts.
      heading.id = 'rbtutor-chapter-' + (made++);
      target = heading.id;
    } else if (heading) {
      const section = heading.parentElement;
      const unique = section && section.nodeName === 'SECTION' && section.id &&
        document.querySelectorAll(`[id="${CSS.escape(section.id)}"]`).length === 1;
      if (unique) target = section.id;
      else {
        heading.id = 'rbtutor-heading-' + (made++);
        target = heading.id;
      }
    }
    entries.push({kind, level, heading, id: target,
                  parts: heading ? texOf(heading) : [{text: fallback}]});
  };
  const rootSection = article.querySelector('section');
  const docs = [];
  if (toc) {
    for (const node of toc.children) {
      if (node.matches('p.caption')) {
        addEntry('part', 0, null, node.textContent.trim());
      } else if (node.matches('ul')) {
        for (const link of node.querySelectorAll('a[href^="#document-"]')) {
          const name = decodeURIComponent(link.getAttribute('href').slice(1));
          const marker = document.getElementById(name);
          const section = marker && marker.nextElementSibling;
          if (!section || section.nodeName !== 'SECTION') continue;
          const depth = (link.closest('li').className.match(/toctree-l(\d)/) || [0, 1])[1] - 1;
          docs.push(section);
          addEntry('chapter', 1 + depth, headingOf(section));
          for (const sub of section.querySelectorAll(':scope > section')) {
            const h = headingOf(sub);
            if (h) addEntry('section', 2 + depth, h);
            for (const subsub of sub.querySelectorAll(':scope > section')) {
              const hh = headingOf(subsub);
              if (hh) addEntry('subsection', 3 + depth, hh);
            }
          }
        }
      }
    }
  }
  // The introduction (the root page) comes first, with its own sections.
  if (rootSection) {
    const intro = [];
    const addIntro = (kind, level, heading) => {
      const before = entries.length;
      addEntry(kind, level, heading);
      intro.push(entries.splice(before, 1)[0]);
    };
    addIntro('chapter', 1, headingOf(rootSection));
    for (const sub of rootSection.querySelectorAll(':scope > section')) {
      if (sub.querySelector('span[id^="document-"]')) {
        const h = headingOf(sub);
        if (h) h.style.display = 'none';   // the heading that only wraps the chapters
        continue;
      }
      const h = headingOf(sub);
      if (h) addIntro('section', 2, h);
    }
    entries.unshift(...intro);
  }
  for (const section of docs) section.classList.add('rbtutor-print-chapter');

  const front = document.createElement('section');
  front.className = 'rbtutor-print-front';
  const title = document.createElement('p');
  title.className = 'rbtutor-print-title';
  title.textContent = document.title.replace(/\s+[—-].*$/, '').trim() || 'rbtutor';
  const rootHeading = rootSection && headingOf(rootSection);
  if (rootHeading) title.textContent = rootHeading.textContent.replace('#', '').trim();
  const edition_line = document.createElement('p');
  edition_line.className = 'rbtutor-print-edition';
  edition_line.textContent = {
    instructor: 'Instructor edition: with the answers and worked solutions of the graded problems. Not for students.',
    student: 'Student edition: hints are printed; answers are left out.',
    prose: 'Prose edition, for reading on paper: the code of the notebook cells is left out, their ' +
           'results and figures are printed; hints are printed, answers are left out. ' +
           'The online book and its notebooks have the code.',
  }[edition];
  const contentsTitle = document.createElement('p');
  contentsTitle.className = 'rbtutor-print-contents-title';
  contentsTitle.textContent = 'Contents';
  const list = document.createElement('ol');
  list.className = 'rbtutor-print-contents';
  entries.forEach((entry, index) => {
    const item = document.createElement('li');
    item.className = `rbtutor-print-${entry.kind} rbtutor-print-level-${entry.level}`;
    if (entry.heading) {
      const link = document.createElement('a');
      link.href = '#' + entry.id;
      link.className = 'rbtutor-print-entry';
      const name = document.createElement('span');
      name.className = 'rbtutor-print-name';
      const copy = entry.heading.cloneNode(true);
      copy.querySelectorAll('.headerlink').forEach(n => n.remove());
      name.append(...copy.childNodes);
      const page = document.createElement('span');
      page.className = 'rbtutor-print-page';
      page.dataset.entry = String(index);
      page.textContent = '000';
      link.append(name, page);
      item.append(link);
    } else {
      item.textContent = entry.parts[0].text;
    }
    list.append(item);
  });
  front.append(title, edition_line, contentsTitle, list);
  article.prepend(front);
  const printToc = document.getElementById('jb-print-docs-body');
  if (printToc) printToc.remove();

  // 4. Wide content scaled to the printable width (the viewport is set to it).
  const fit = (element, inner) => {
    const available = element.parentElement ? element.parentElement.clientWidth : element.clientWidth;
    const needed = inner.scrollWidth || inner.getBoundingClientRect().width;
    if (available > 0 && needed > available + 1) {
      element.style.zoom = String(Math.max(0.4, (available - 2) / needed));
      report.scaled += 1;
    }
  };
  for (const math of document.querySelectorAll('mjx-container[display="true"]')) {
    const inner = math.querySelector('mjx-math') || math;
    fit(math, inner);
  }
  for (const table of document.querySelectorAll('article table')) fit(table, table);

  report.entries = entries.map(e => ({kind: e.kind, level: e.level, id: e.id, parts: e.parts}));
  return report;
})(%EDITION%, %GENERIC%, %ANSWER%)
"""

# Before the first edition is prepared: each typeset formula keeps its TeX source (data-tex, which the
# contents list reads), and the page as typeset is kept, so that each further edition starts from it
# (RESTORE_JS) instead of loading and typesetting the book again. MathJax's own list of formulas points
# at the first page's nodes only; matplotlib's animations look their frame up by id, so they follow.
MARK_AND_KEEP_JS = r"""
(() => {
  const items = window.MathJax && MathJax.startup && MathJax.startup.document ? MathJax.startup.document.math : [];
  let marked = 0;
  for (const item of items) {
    if (item.typesetRoot && item.typesetRoot.dataset) { item.typesetRoot.dataset.tex = item.math; marked += 1; }
  }
  window.rbtutorTypeset = document.body.cloneNode(true);
  return marked;
})()
"""

RESTORE_JS = r"""
(() => {
  document.body.replaceWith(window.rbtutorTypeset.cloneNode(true));
  return document.querySelectorAll('mjx-container').length;
})()
"""

FILL_PAGES_JS = r"""
((pages) => {
  let filled = 0;
  for (const span of document.querySelectorAll('.rbtutor-print-page')) {
    const page = pages[span.dataset.entry];
    if (page !== undefined && page !== null) { span.textContent = String(page); filled += 1; }
  }
  // laid out again from scratch: after Chromium's own re-layout of a few changed digits, a heading at
  // the foot of a page went to the next page and back, print after print, and the numbers never settled
  document.body.style.display = 'none';
  void document.body.offsetHeight;
  document.body.style.display = '';
  void document.body.offsetHeight;
  return filled;
})(%PAGES%)
"""


# The printed editions: what each one is for (`make pdf EDITION=...`).
EDITIONS = {
    "student": "hints printed, answers left out",
    "instructor": "the answers and worked solutions printed too",
    "prose": "as the student edition, without the code of the notebook cells",
}


def prepare_script(edition: str) -> str:
    """PREPARE_JS for one of the :data:`EDITIONS`."""
    if edition not in EDITIONS:
        raise ValueError(f"expected edition one of {sorted(EDITIONS)}, got {edition!r}")
    return (PREPARE_JS.replace("%EDITION%", json.dumps(edition))
            .replace("%GENERIC%", json.dumps(GENERIC_LABEL))
            .replace("%ANSWER%", json.dumps(ANSWER_LABEL)))


def fill_pages_script(pages: dict[int, int]) -> str:
    """FILL_PAGES_JS with the page number of each contents entry (by its index)."""
    return FILL_PAGES_JS.replace("%PAGES%", json.dumps({str(k): v for k, v in pages.items()}))
