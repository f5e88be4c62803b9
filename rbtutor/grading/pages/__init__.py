"""Step: feedback and reports, the markup. Every HTML page the course writes, rendered from one set of templates.

The feedback page (:mod:`rbtutor.grading.feedback`), the class report
(:mod:`rbtutor.course.class_report`), the statistics of the instant checks
(:mod:`rbtutor.course.checks.stats`) and the similarity report
(:mod:`rbtutor.course.similarity.report`) each shape their data in Python and hand plain values
to :func:`render`, which fills a Jinja2 template of ``templates/``. Every template extends
``base.html``: the doctype, the language, the character set, the viewport, a
Content-Security-Policy (:data:`CSP`) that forbids scripts and every remote load, the title and
the CSS the pages share.

The environment escapes every value (autoescaping on for every template), so a student's id,
file name or printed text reaches the page as text, escaped once; a caller must not escape it
beforehand. HTML that an earlier step has already made safe (a student's markdown after
:mod:`rbtutor.grading.allowlist`, MathML, highlighted source) is passed as
:class:`markupsafe.Markup` by that caller, at the one place where it is known to be safe. A
variable a template uses but the caller did not pass is an error (``StrictUndefined``), never an
empty string.

>>> render("base.html", title="a < b")[:15]
'<!DOCTYPE html>'
"""

from __future__ import annotations

import jinja2
from markupsafe import Markup

__all__ = ["CSP", "ENVIRONMENT", "Markup", "render"]

#: The Content-Security-Policy of every page: nothing loads, nothing runs; inline CSS and ``data:`` images only.
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"

#: The one Jinja2 environment of the course's pages.
ENVIRONMENT = jinja2.Environment(
    loader=jinja2.PackageLoader(__name__, "templates"),
    autoescape=jinja2.select_autoescape(("html",), default_for_string=True, default=True),
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)
# Markup: a constant of this module, with no double quote to end the attribute it is written in
ENVIRONMENT.globals["csp"] = Markup(CSP)


def render(template_name: str, **context) -> str:
    """The page ``templates/<template_name>`` filled with ``context``, every value escaped unless it is Markup.

    Raises
    ------
    jinja2.UndefinedError
        If the template uses a variable that ``context`` does not give.
    jinja2.TemplateNotFound
        If there is no such template.
    """
    return ENVIRONMENT.get_template(template_name).render(**context)
