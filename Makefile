# Attention by Hand: one entry point for readers, students, instructors and CI.
#   make site   set up .venv if needed, build the website, print where it is
#   make test   set up everything, then run every test (the book build and nbgrader included)
#   make translations                 translators: update every catalogue from the sources (locales/README.md)
#   make release                      instructors: release every problem set into exercises/release/
#   make grade SUBMISSIONS=path [PS=ps1_qkv]
#                                     instructors: grade a folder submitted/<student>/<ps>/ or an LMS zip,
#                                     write feedback HTML and exercises/grades.csv
#   make lock   after editing requirements.in: resolve it again into requirements.txt, the lock
# Only Python 3.11 and make are assumed; everything else is installed from requirements.txt, the lock:
# every package at the version and hash it names (and Debian's nodejs to typeset the site's math,
# Chromium for the browser test and bubblewrap for the grading sandbox, with apt-get when run as
# root).

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed
BUILD_DIR := _build
SITE = $(BUILD_DIR)/html/index.html
QKV_BUILT = $(BUILD_DIR)/.qkv-built
# Processes that read (and so execute) the chapters: two per core, because a reading process
# waits while its chapter's kernel computes and Sphinx gives each process a fixed share of pages.
JOBS := $(shell echo $$(( 2 * $$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1) )))
PYTEST_ARGS ?=
# Every Python this Makefile starts writes the bytecode of a module it imports the first time, to use
# it after: an environment that says otherwise (PYTHONDONTWRITEBYTECODE, as some containers set it)
# would make every process (each chapter's kernel, each Sphinx and nbgrader process) compile numpy,
# IPython, Sphinx, ... from source again. Measured: grading 45 hand-ins took 53 s of CPU without
# bytecode and 27 s with it.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: site test venv lock node browser sandbox debian-packages clean release grade translations

SPHINX = PYTHONPATH=$(CURDIR)/book/_ext$${PYTHONPATH:+:$$PYTHONPATH} $(BIN)/sphinx-build
# Both editions, English at $(BUILD_DIR)/html and 繁體中文 at $(BUILD_DIR)/html/zh-TW, from the same
# chapters. sphinx-build reads the pages in $(JOBS) processes (`jupyter-book build` reads them one
# by one). The conf.py that Jupyter Book generates does not put the local extensions on the path:
# PYTHONPATH does.
#
# A full build (a first one, or after a change under src/) runs the two editions side by side, so
# that each fills the cores the other leaves idle (its kernels starting, its pages being written);
# the 繁體中文 build's output is printed when it is done. A translated page shows what the English
# build of the same page measured (book/_ext/editions.py): beside the English build, such a page
# waits until the English one has read its twin, so their measurements, kept from an earlier build,
# are removed first. An incremental build runs the editions one after the other, so that a Chinese
# page never reads a measurement the English build is about to replace.
ENGLISH = -b html -j $(JOBS) -W --keep-going -d $(BUILD_DIR)/.doctrees . $(BUILD_DIR)/html
CHINESE = -b html -j $(JOBS) -W --keep-going -D language=zh_TW -d $(BUILD_DIR)/.doctrees-zh_TW . $(BUILD_DIR)/html/zh-TW
site: $(INSTALLED) node conf.py
	@# A change under src/ (code, or what the kernels print in zh-TW) changes every page: rebuild them
	@# all (Sphinx only tracks the pages and their catalogues).
	@if [ -f $(QKV_BUILT) ] && [ -z "$$(find src \( -name '*.py' -o -name '*.po' \) -newer $(QKV_BUILT))" ]; then \
		$(SPHINX) $(ENGLISH) && $(SPHINX) $(CHINESE); \
	else \
		rm -rf $(BUILD_DIR)/measurements && mkdir -p $(BUILD_DIR) && \
		{ $(SPHINX) -E $(ENGLISH) & \
		  english=$$!; \
		  QKV_ENGLISH_BUILD_PID=$$english $(SPHINX) -E $(CHINESE) > $(BUILD_DIR)/zh_TW.log 2>&1; \
		  chinese=$$?; wait $$english; english=$$?; \
		  echo "--- 繁體中文 edition ($(BUILD_DIR)/zh_TW.log) ---"; cat $(BUILD_DIR)/zh_TW.log; \
		  [ $$english = 0 ] && [ $$chinese = 0 ]; }; \
	fi
	@touch $(QKV_BUILT)
	@echo "The website is at $(abspath $(SITE)) (繁體中文: $(abspath $(BUILD_DIR)/html/zh-TW/index.html))"

# Translators: bring every catalogue in step with the sources (locales/README.md). The prose of
# every page (Sphinx's gettext builder, which runs the chapters), the theme's and the extensions'
# words, what the chapter kernels draw and print, what the problem sets' checks say, and the
# problem sets' markdown; sphinx-intl then updates each .po, marking
# a changed message fuzzy. A fixed SOURCE_DATE_EPOCH (2026-01-01) keeps unchanged catalogues unchanged.
translations: $(INSTALLED) conf.py
	rm -rf $(BUILD_DIR)/gettext $(BUILD_DIR)/gettext-kernel $(BUILD_DIR)/gettext-exercises
	SOURCE_DATE_EPOCH=1767225600 $(SPHINX) -b gettext -j $(JOBS) -W --keep-going -d $(BUILD_DIR)/.doctrees-gettext . $(BUILD_DIR)/gettext
	$(BIN)/python locales/extract_messages.py $(BUILD_DIR)/gettext $(BUILD_DIR)/gettext-kernel $(BUILD_DIR)/gettext-exercises
	$(BIN)/sphinx-intl update -p $(BUILD_DIR)/gettext -d locales -l zh_TW -w 0 --no-obsolete
	$(BIN)/sphinx-intl update -p $(BUILD_DIR)/gettext-kernel -d src/qkv_book/locales -l zh_TW -w 0 --no-obsolete
	$(BIN)/sphinx-intl update -p $(BUILD_DIR)/gettext-exercises/messages -d src/qkv_exercises/locales -l zh_TW -w 0 --no-obsolete
	$(BIN)/sphinx-intl update -p $(BUILD_DIR)/gettext-exercises/notebooks -d exercises/locales -l zh_TW -w 0 --no-obsolete

# Sphinx's configuration, made from _config.yml (edit that; conf.py is generated and not in git).
conf.py: _config.yml _toc.yml $(INSTALLED)
	$(BIN)/jupyter-book config sphinx . >/dev/null

# The tests run in one process per core (pytest-xdist); the tests that share a fixture run in the
# same process and the book is built once for all (tests/workers.py). TEST_WORKERS=0 runs them in
# this process alone. conf.py first, so that no two tests make it at the same time.
# On a new machine, Debian's packages download and unpack while pip installs the lock (apt-get and
# pip wait on different things); the packages one after the other, as apt-get holds a lock.
TEST_WORKERS ?= $(shell getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
test:
	@$(MAKE) --no-print-directory -j 2 $(INSTALLED) debian-packages
	@$(MAKE) --no-print-directory conf.py
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

debian-packages:
	@$(MAKE) --no-print-directory node browser sandbox

venv: $(INSTALLED)

# The lock in pip's hash-checking mode: every package at its version, each file checked against its
# hash, nothing resolved anew (pip stops if the lock misses a dependency). First the locked pip alone
# (its own lines of the lock), so that the rest is installed by it rather than by the venv's older
# one. pip-sync then removes what the lock no longer names. The course package itself last,
# editable (hash-checking mode takes no editable install), built by the locked setuptools instead of
# a freely resolved one. --no-compile: pip would spend about a minute writing the bytecode of every
# module of every package (torch's, sympy's, ...); Python writes it for a module when it first imports
# it (see PYTHONDONTWRITEBYTECODE above), so only what runs is compiled, once. A grading sandbox sees
# its packages read-only and can never write their bytecode: they are compiled here (compile_allowed).
$(INSTALLED): requirements.txt pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "$(PYTHON) not found; run: make PYTHON=/path/to/python3.11"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	awk '/^[^ #]/ { pip = /^pip==/ } pip' requirements.txt > $(VENV)/pip-lock.txt
	$(BIN)/python -m pip install --no-compile --require-hashes --no-deps -r $(VENV)/pip-lock.txt
	$(BIN)/python -m pip install --no-compile --require-hashes -r requirements.txt
	$(BIN)/pip-sync --quiet --pip-args=--no-compile requirements.txt
	$(BIN)/python -m pip install --no-compile --no-deps --no-build-isolation -e .
	$(BIN)/python -c "from qkv_grading.sandbox import compile_allowed; compile_allowed()"
	@# Build matplotlib's font cache now, not in the middle of the first book build.
	$(BIN)/python -c "import matplotlib.font_manager"
	@touch $@

# requirements.in (the top-level pins, by hand) and pyproject.toml's dependencies -> requirements.txt.
# Versions already in the lock stay; a package added to requirements.in is resolved and locked with
# all it brings. To move a package that requirements.in does not pin:
# make lock LOCK_ARGS="--upgrade-package NAME" (or --upgrade for all). The options keep this
# machine's package folders out of the file.
LOCK_ARGS ?=
lock: $(INSTALLED)
	CUSTOM_COMPILE_COMMAND="make lock" $(BIN)/pip-compile --quiet --generate-hashes --allow-unsafe \
		--strip-extras --no-emit-index-url --no-emit-find-links --output-file requirements.txt \
		$(LOCK_ARGS) requirements.in pyproject.toml

# The site's math is typeset when it is built, by MathJax (from requirements.txt) in Debian's node.
node:
	@if command -v node >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs; \
	else \
		echo "The site's math is typeset by MathJax in node when the site is built: sudo apt-get install nodejs"; exit 1; \
	fi

# The browser test drives Debian's Chromium (no browser download); a CJK font lets it show the tokens.
browser:
	@if [ -x /usr/bin/chromium ] && fc-list 2>/dev/null | grep -qi 'wenquanyi\|noto sans cjk'; then :; \
	elif [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-wqy-microhei; \
	else \
		echo "The browser test needs Debian's Chromium and a CJK font: sudo apt-get install chromium fonts-wqy-microhei"; exit 1; \
	fi

# Grading runs every submission in a bubblewrap sandbox (Debian's bubblewrap) with a seccomp filter
# that libseccomp compiles (Debian's libseccomp2).
sandbox:
	@if command -v bwrap >/dev/null && ldconfig -p | grep -q libseccomp.so.2; then :; \
	elif [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap libseccomp2; \
	else \
		echo "Grading needs bubblewrap (bwrap) and libseccomp: sudo apt-get install bubblewrap libseccomp2"; exit 1; \
	fi

release: $(INSTALLED)
	$(BIN)/python -m qkv_grading release

grade: $(INSTALLED)
	@command -v bwrap >/dev/null || { echo "make grade runs each submission in a sandbox and needs bubblewrap: sudo apt-get install bubblewrap"; exit 1; }
	@test -n "$(SUBMISSIONS)" || { echo "usage: make grade SUBMISSIONS=<folder submitted/<student>/<ps>/ or LMS .zip> [PS=<problem set>]"; exit 2; }
	$(BIN)/python -m qkv_grading grade "$(SUBMISSIONS)" $(if $(PS),--problem-set $(PS))

clean:
	rm -rf _build conf.py
