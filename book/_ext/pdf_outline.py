"""The printed book's page numbers and outline, read and written with pypdf (`make pdf`).

Used by book/_ext/print_pdf.py after Chromium has printed the page. Chromium
turns every in-book link target into a named destination called after the
element's id, so the page of each contents entry is that of its destination
(:func:`entry_pages`). Chromium's own outline takes each heading's text as laid
out: formulas vanish (MathJax draws them, they are not text) and some entries
come out twice. :func:`replace_outline` puts a new outline in its place, built
from the contents entries (parts, chapters, sections) with every formula written
as Unicode text (:func:`tex_to_text`).
"""

from __future__ import annotations

import io
import logging
import re
import unicodedata

from pypdf import PdfReader, PdfWriter
from pypdf.generic import Fit, NameObject

# Chromium's PDFs make pypdf note that the object count exceeds the trailer's size; harmless.
logging.getLogger("pypdf").setLevel(logging.ERROR)

GREEK = {name: chr(code) for name, code in [
    ("alpha", 0x3B1), ("beta", 0x3B2), ("gamma", 0x3B3), ("delta", 0x3B4), ("epsilon", 0x3B5),
    ("varepsilon", 0x3B5), ("zeta", 0x3B6), ("eta", 0x3B7), ("theta", 0x3B8), ("vartheta", 0x3D1),
    ("iota", 0x3B9), ("kappa", 0x3BA), ("lambda", 0x3BB), ("mu", 0x3BC), ("nu", 0x3BD),
    ("xi", 0x3BE), ("pi", 0x3C0), ("rho", 0x3C1), ("sigma", 0x3C3), ("tau", 0x3C4),
    ("upsilon", 0x3C5), ("phi", 0x3C6), ("varphi", 0x3C6), ("chi", 0x3C7), ("psi", 0x3C8),
    ("omega", 0x3C9), ("Gamma", 0x393), ("Delta", 0x394), ("Theta", 0x398), ("Lambda", 0x39B),
    ("Xi", 0x39E), ("Pi", 0x3A0), ("Sigma", 0x3A3), ("Phi", 0x3A6), ("Psi", 0x3A8), ("Omega", 0x3A9),
]}
SYMBOLS = {
    "times": "×", "otimes": "⊗", "cdot": "·", "pm": "±", "circ": "°", "approx": "≈", "le": "≤",
    "leq": "≤", "ge": "≥", "geq": "≥", "to": "→", "rightarrow": "→", "infty": "∞", "partial": "∂",
    "top": "T", "prime": "′", "ne": "≠", "neq": "≠", "sim": "~", "ldots": "…", "dots": "…",
    "nabla": "∇", "in": "∈",
}
SUPERSCRIPT = str.maketrans("0123456789+-=()nTi*", "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁼⁽⁾ⁿᵀⁱ*")
SUBSCRIPT = str.maketrans("0123456789+-=()aehijklmnoprstuvx", "₀₁₂₃₄₅₆₇₈₉₊₋₌₍₎ₐₑₕᵢⱼₖₗₘₙₒₚᵣₛₜᵤᵥₓ")
# Accents become combining characters after their argument.
ACCENTS = {"dot": "\u0307", "ddot": "\u0308", "hat": "\u0302", "bar": "\u0304", "tilde": "\u0303"}
# Commands that only change the font: their argument is kept as it is.
FONT_COMMANDS = ("boldsymbol", "mathbf", "mathrm", "mathit", "mathsf", "mathcal", "text", "vec",
                 "operatorname", "bm", "textrm", "textbf")


def _script(argument: str, table: dict, marker: str) -> str:
    translated = argument.translate(table)
    if all(ord(ch) in table.values() for ch in translated if ch != " "):
        return translated
    return f"{marker}{argument}"


def tex_to_text(tex: str) -> str:
    """A formula of a heading in TeX as readable Unicode text (for PDF outline entries).

    >>> tex_to_text(r"\\dot{\\boldsymbol R}\\boldsymbol R^T")
    'Ṙ Rᵀ'
    >>> tex_to_text(r"G_b")
    'G_b'
    >>> tex_to_text(r"z_G")
    'z_G'
    >>> tex_to_text(r"\\boldsymbol\\theta\\otimes\\mathbf x\\otimes\\boldsymbol\\theta^*")
    'θ⊗x⊗θ*'
    >>> tex_to_text(r"\\dot{\\boldsymbol\\theta} = \\tfrac14 G^\\top\\vec\\omega")
    'θ̇ = 1/4 Gᵀω'
    """
    argument = r"(\\[A-Za-z]+|[^\s\\{}])"
    text = tex.strip()
    text = re.sub(r"\\(left|right|big|Big|bigg|Bigg)\b", "", text)
    text = re.sub(r"\\[,;:! ]", " ", text)
    text = re.sub(r"\\t?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}", r"\1/\2", text)
    text = re.sub(r"\\t?frac\s*(\d)(\d)", r"\1/\2", text)
    # Letters and symbols first: a command ends where its letters end, as in TeX.
    text = re.sub(r"\\([A-Za-z]+)",
                  lambda m: GREEK.get(m.group(1)) or SYMBOLS.get(m.group(1)) or m.group(0), text)
    for _ in range(4):  # nested groups, innermost first
        for command in FONT_COMMANDS:
            text = re.sub(r"\\" + command + r"\s*\{([^{}]*)\}", r"\1", text)
            text = re.sub(r"\\" + command + r"(?![A-Za-z])\s*" + argument, r"\1", text)
        for command, mark in ACCENTS.items():
            text = re.sub(r"\\" + command + r"\s*\{([^{}]*)\}", lambda m, k=mark: m.group(1) + k, text)
            text = re.sub(r"\\" + command + r"(?![A-Za-z])\s*" + argument, lambda m, k=mark: m.group(1) + k, text)
    text = re.sub(r"\\([A-Za-z]+)", r"\1", text)  # any other command: its name
    text = re.sub(r"\^\{([^{}]*)\}", lambda m: _script(m.group(1), SUPERSCRIPT, "^"), text)
    text = re.sub(r"\^(\S)", lambda m: _script(m.group(1), SUPERSCRIPT, "^"), text)
    text = re.sub(r"_\{([^{}]*)\}", lambda m: _script(m.group(1), SUBSCRIPT, "_"), text)
    text = re.sub(r"_(\S)", lambda m: _script(m.group(1), SUBSCRIPT, "_"), text)
    text = text.replace("{", "").replace("}", "")
    # An accented letter followed by another letter reads better with a space between.
    text = re.sub(r"(?<=[\u0307\u0308\u0302\u0304\u0303])(?=[A-Za-z\u0370-\u03ff])", " ", text)
    # Composed where Unicode has the letter (R and a dot above are Ṙ).
    return unicodedata.normalize("NFC", re.sub(r"\s+", " ", text).strip())


def entry_title(parts: list[dict]) -> str:
    """The title of a contents entry: its text with every formula as Unicode text."""
    pieces = [tex_to_text(part["tex"]) if "tex" in part else part.get("text", "") for part in parts]
    return re.sub(r"\s+", " ", "".join(pieces)).replace("#", "").strip()


def entry_pages(pdf: bytes, entries: list[dict]) -> dict[int, int]:
    """Page number (1-based) of each contents entry that has a heading, by the entry's index.

    Raises ValueError naming the entries whose heading has no destination in the PDF.
    """
    reader = PdfReader(io.BytesIO(pdf))
    named = reader.named_destinations
    pages, missing = {}, []
    for index, entry in enumerate(entries):
        if not entry.get("id"):
            continue
        destination = named.get("/" + entry["id"]) or named.get(entry["id"])
        if destination is None:
            missing.append(entry["id"])
            continue
        pages[index] = reader.get_destination_page_number(destination) + 1
    if missing:
        raise ValueError(f"expected a destination in the PDF for every contents entry, "
                         f"got none for {missing[:10]} ({len(missing)} in all)")
    return pages


def replace_outline(pdf: bytes, entries: list[dict]) -> bytes:
    """The PDF with its outline rebuilt from the contents entries (parts > chapters > sections)."""
    reader = PdfReader(io.BytesIO(pdf))
    named = reader.named_destinations
    writer = PdfWriter(clone_from=reader)
    root = writer._root_object
    if "/Outlines" in root:
        del root[NameObject("/Outlines")]
    parents: dict[int, object] = {}
    for index, entry in enumerate(entries):
        title = entry_title(entry["parts"])
        level = entry["level"]
        parent = next((parents[k] for k in range(level - 1, -1, -1) if k in parents), None)
        if entry.get("id"):
            destination = named.get("/" + entry["id"]) or named.get(entry["id"])
            page = reader.get_destination_page_number(destination)
            top = destination.get("/Top")
            fit = Fit.xyz(left=destination.get("/Left"), top=top) if top is not None else Fit.fit()
        else:
            # A part has no heading of its own: it points at its first chapter.
            following = next((e for e in entries[index + 1:] if e.get("id")), None)
            if following is None:
                continue
            destination = named.get("/" + following["id"]) or named.get(following["id"])
            page, fit = reader.get_destination_page_number(destination), Fit.fit()
        item = writer.add_outline_item(title=title, page_number=page, parent=parent, fit=fit)
        parents[level] = item
        for deeper in [k for k in parents if k > level]:
            del parents[deeper]
    writer.page_mode = "/UseOutlines"
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()
