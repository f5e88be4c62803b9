# rbtutor: `make book` and `make test` are all a fresh clone needs.
# Both create .venv on first use (python3 -m venv) and install the pinned set
# from constraints.txt; later runs reuse it until pyproject.toml or
# constraints.txt change.

SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# the course's one command (rbtutor --help); every target below that drives the course calls it
RBTUTOR := $(VENV)/bin/rbtutor

# Every recipe sees the venv first on PATH (jb, ruff, and nbgrader's alembic)
# and renders matplotlib figures without a display. Notebook kernels of the
# book build take the python3 kernelspec in book/_jupyter, which switches them
# to the (Agg-based) inline backend; with plain Agg, plt.show() shows nothing.
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export MPLBACKEND := Agg
export JUPYTER_PATH := $(CURDIR)/book/_jupyter$(if $(JUPYTER_PATH),:$(JUPYTER_PATH))
export PIP_DISABLE_PIP_VERSION_CHECK := 1

# The book build. tests/conftest.py runs the same command; keep them in step.
# --all re-reads every page so that warnings are re-reported on every run
# (executed notebooks still come from the jupyter-cache in _build/).
JB_BUILD := jb build . --all -W --keep-going --path-output .

.PHONY: help bootstrap book pdf test bench lint clean distclean assignments grade solutions hub hub-stop

help:
	@echo "make book       build the course book into _build/html/index.html"
	@echo "make pdf        the whole book as one PDF, offline: _build/pdf/rbtutor.pdf"
	@echo "                (EDITION=instructor: with the answers, _build/pdf/rbtutor-instructor.pdf;"
	@echo "                EDITION=prose: without the code of the cells, _build/pdf/rbtutor-prose.pdf;"
	@echo "                EDITION=all: the three, typeset once)"
	@echo "make screenshots  the Student and Instructor guides' screens (book/manual/*/screens/) again from test-artifacts/hub/"
	@echo "make test       run the test suite (builds the book offline, browser checks)"
	@echo "make bench      run every benchmarks/bench_*.py"
	@echo "make lint       ruff check ."
	@echo "make assignments [DATA=ship.yaml]  student versions of the twelve assignments into release/"
	@echo "make solutions  the worked solutions, executed, into _build/solutions/"
	@echo "make grade      autograde submitted/, feedback into feedback/, grades into grades.csv"
	@echo "                (SCHEDULER=tcp://host:8786: on the workers of that Dask scheduler)"
	@echo "make report     the class report, report/index.html (make grade writes it too)"
	@echo "make export TO=canvas|moodle|blackboard ROSTER=roster.csv [OUT=file]  final scores for the LMS"
	@echo "make hub        (root) set up the course on a JupyterHub and start it on http://127.0.0.1:8000"
	@echo "make hub-stop   (root) stop that hub and its users' servers"
	@echo "make clean      remove build output and caches (keeps .venv)"
	@echo "make distclean  clean, and remove .venv and .node"

$(PY):
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml constraints.txt | $(PY)
	$(PY) -m pip install --upgrade -c constraints.txt pip setuptools
	$(PY) -m pip install -c constraints.txt -e '.[course,hub,test]'
	touch $@

# axe-core (npm registry) for the accessibility checks of the browser tests, into
# .node/ (not in git). Without npm the checks are skipped locally and fail in CI.
AXE_VERSION := 4.14.1
AXE := .node/node_modules/axe-core/axe.min.js

$(AXE):
	@if command -v npm >/dev/null; then \
	  npm install --prefix .node --no-save --no-audit --no-fund --loglevel=error axe-core@$(AXE_VERSION); \
	else \
	  echo "npm not found: the axe-core accessibility checks will be skipped (they fail in CI)"; \
	fi

# configurable-http-proxy (npm registry, pinned by hub/package-lock.json) for the JupyterHub that
# the check-service and hub tests start. Without npm those tests are skipped locally, fail in CI.
PROXY := hub/node_modules/.bin/configurable-http-proxy

$(PROXY): hub/package-lock.json
	@if command -v npm >/dev/null; then \
	  npm ci --prefix hub --no-audit --no-fund --loglevel=error; \
	else \
	  echo "npm not found: the tests that start a JupyterHub will be skipped (they fail in CI)"; \
	fi

# three.js and esbuild (npm registry) for the book's 3D motion viewer: book/_ext/motion3d.py bundles
# them with its script when the book is written. Into a prefix of their own, .node/motion3d/ (an npm
# install into .node itself removes the axe-core there). The book cannot be built without them.
THREE_VERSION := 0.187.0
ESBUILD_VERSION := 0.28.2
MOTION3D := .node/motion3d/.installed-three-$(THREE_VERSION)-esbuild-$(ESBUILD_VERSION)

$(MOTION3D):
	@command -v npm >/dev/null || { echo "npm not found: install npm (apt-get install npm); the book's 3D viewer needs three.js from the npm registry" >&2; exit 1; }
	npm install --prefix .node/motion3d --no-save --no-audit --no-fund --loglevel=error three@$(THREE_VERSION) esbuild@$(ESBUILD_VERSION)
	touch $@

# reveal.js (npm registry) for the slide decks of the chapter pages: book/_ext/slides.py copies it into
# _static/reveal/ when the book is written. Into a prefix of its own, .node/slides/, like three.js.
# The book cannot be built without it.
REVEAL_VERSION := 6.0.2
SLIDES := .node/slides/.installed-reveal-$(REVEAL_VERSION)

$(SLIDES):
	@command -v npm >/dev/null || { echo "npm not found: install npm (apt-get install npm); the book's slide decks need reveal.js from the npm registry" >&2; exit 1; }
	npm install --prefix .node/slides --no-save --no-audit --no-fund --loglevel=error reveal.js@$(REVEAL_VERSION)
	touch $@

bootstrap: $(STAMP) $(AXE) $(PROXY) $(MOTION3D) $(SLIDES)

book: $(STAMP) $(MOTION3D) $(SLIDES)
	$(JB_BUILD)
	@echo "Book: $(CURDIR)/_build/html/index.html"

# The tests run in TEST_WORKERS processes (pytest-xdist); tests/conftest.py says how they are shared out.
# Two more than the cores: much of the suite waits (on browsers, the hub, servers it starts), and the
# workers off the machine's tests take a lower priority. Fresh clones on 2 cores, 2026-12-07: 28:43 of
# tests with three, 22:47 with four (25:58 with four before the lower priority).
TEST_WORKERS ?= $(shell echo $$(( $$(nproc) + 2 )))
test: $(STAMP) $(AXE) $(PROXY) $(MOTION3D) $(SLIDES)
	$(PY) -m pytest -n $(TEST_WORKERS) --durations=20

# Every benchmark runs, even after one misses a target; then the status is 1 if any did.
# BENCH_CLASS=30,300[,273xall]: the grading benchmark's classes: N students handing in problem03 and
# problem10, or Nxall: N students handing in every assignment (default 30; larger ones are slow).
# BENCH_CLUSTER_UP_TO=N: the Dask cluster grades the growth classes up to N notebooks (default 300).
bench: $(STAMP)
	@shopt -s nullglob; scripts=(benchmarks/bench_*.py); \
	if [ $${#scripts[@]} -eq 0 ]; then echo "no benchmarks/bench_*.py yet"; exit 0; fi; \
	failed=(); \
	for s in "$${scripts[@]}"; do \
	  echo "== $$s"; \
	  $(PY) "$$s" || failed+=("$$s"); \
	done; \
	if [ $${#failed[@]} -gt 0 ]; then echo "make bench: missed a target or failed: $${failed[*]}"; exit 1; fi

# The whole book as one PDF, offline: the single-page HTML build printed by headless
# Chromium once MathJax has typeset it (book/_ext/print_pdf.py, print stylesheet
# book/_ext/static/rbtutor-print.css). Executed notebooks come from the same cache
# as `make book`.
# EDITION=instructor prints the answers and worked solutions too, into rbtutor-instructor.pdf;
# the student edition (the default) leaves them out and prints the hints. EDITION=prose, for
# reading on paper, is the student edition without the code of the notebook cells (their results
# and figures stay), into rbtutor-prose.pdf. EDITION=all prints the three from one typesetting.
EDITION ?= student
PDF := $(if $(filter all,$(EDITION)),_build/pdf,_build/pdf/rbtutor$(if $(filter-out student,$(EDITION)),-$(EDITION)).pdf)
JB_SINGLEHTML := jb build . --all -W --keep-going --builder singlehtml --path-output _build/pdf

pdf: $(STAMP) $(MOTION3D) $(SLIDES)
	$(JB_SINGLEHTML)
	$(PY) book/_ext/print_pdf.py _build/pdf/_build/singlehtml/index.html $(PDF) --edition $(EDITION)

# The screenshots of the Student and Instructor guides, taken again from the last run of
# tests/test_hub.py, which saves them into test-artifacts/hub/: every screens/NAME.png a page of a
# guide shows is copied from there into that guide's screens/ folder (tracked in git, so the book
# builds without a hub). Nothing is copied when one is missing.
GUIDES  := book/manual/student book/manual/instructor
SHOTS   := test-artifacts/hub

.PHONY: screenshots
screenshots:
	@targets=""; \
	for guide in $(GUIDES); do \
	  for name in $$(cat $$guide/*.md 2>/dev/null | grep -o 'screens/[A-Za-z0-9._-]*\.png' | sed 's|^screens/||' | sort -u); do \
	    targets="$$targets $$guide/screens/$$name"; \
	  done; \
	done; \
	if [ -z "$$targets" ]; then echo "make screenshots: no page of $(GUIDES) shows a screens/*.png" >&2; exit 1; fi; \
	missing=0; \
	for target in $$targets; do \
	  if [ ! -f "$(SHOTS)/$${target##*/}" ]; then \
	    echo "make screenshots: $(SHOTS)/$${target##*/} is missing: run tests/test_hub.py (as root) first" >&2; \
	    missing=1; \
	  fi; \
	done; \
	[ $$missing -eq 0 ] || exit 1; \
	for target in $$targets; do mkdir -p "$${target%/*}"; cp "$(SHOTS)/$${target##*/}" "$$target"; done; \
	echo "make screenshots: $$(echo $$targets | wc -w) screens copied from $(SHOTS)/ into the guides' screens/ folders"

# The student versions of the assignments, from the reference data or from DATA=variant.yaml.
assignments: $(STAMP)
	$(RBTUTOR) render $(if $(DATA),--data $(DATA))
	$(RBTUTOR) assign

# The worked solutions (the source notebooks), executed, as HTML pages.
solutions: $(STAMP)
	mkdir -p _build/solutions
	jupyter nbconvert --to html --execute --output-dir _build/solutions exercises/problem*/problem*.ipynb
	@echo "Worked solutions: $(CURDIR)/_build/solutions/"

grade: $(STAMP)
	$(RBTUTOR) grade$(if $(SCHEDULER), --scheduler $(SCHEDULER))

# The class report, report/index.html (make grade writes it too; rbtutor/course/class_report.py).
.PHONY: report
report: $(STAMP)
	$(RBTUTOR) report

# The final scores as the file an LMS imports (rbtutor/course/export.py says which rules each follows).
.PHONY: export
export: $(STAMP)
	@test -n "$(TO)" -a -n "$(ROSTER)" || { echo "usage: make export TO=canvas|moodle|blackboard ROSTER=roster.csv [OUT=file]" >&2; exit 2; }
	$(RBTUTOR) export --to $(TO) --roster $(ROSTER) --out $(or $(OUT),grades-$(TO).$(if $(filter blackboard,$(TO)),txt,csv))

# The course on a JupyterHub on this machine (root only; hub/hubctl.py says what it sets up).
# hubctl makes its own environments under /opt/rbtutor from the system python3, not from .venv.
# GRADEBOOK=postgres: the course gradebook on a PostgreSQL server hubctl starts (several graders).
# STUDENT_BOOK=1: students may run the book's notebooks there too (manual: operator/hub).
hub: $(STAMP)
	$(RBTUTOR) hub up $(if $(GRADEBOOK),--gradebook $(GRADEBOOK)) $(if $(STUDENT_BOOK),--student-book)

hub-stop: $(STAMP)
	$(RBTUTOR) hub down

lint: $(STAMP)
	ruff check .

clean:
	rm -rf _build test-artifacts .pytest_cache .ruff_cache .hypothesis
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) *.egg-info .node
